"""Cool-downs are shared: an account throttled through one worker (or replica) rests on every one."""

from __future__ import annotations

from pathlib import Path

from q2api.accounts.pool import AccountPool
from q2api.accounts.records import Account
from q2api.accounts.reload import AccountReloader
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.errors import FailureKind


async def _never_refresh(account: Account):  # pragma: no cover - nothing here refreshes
    raise AssertionError("no refresh expected")


def worker(store: SqliteAccountStore) -> tuple[AccountPool, AccountReloader]:
    pool = AccountPool([], factory=lambda account: TokenManager(account, store, _never_refresh))
    return pool, AccountReloader(store, pool, interval=0.01)


def health(pool: AccountPool) -> dict[str, str]:
    return {view.label: view.health for view in pool.health()}


async def test_a_throttle_and_its_end_reach_every_worker(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.add(auth_method="social", refresh_token="r1", label="busy")
    spare = await store.add(auth_method="social", refresh_token="r2", label="spare")
    (first, first_reloader), (second, second_reloader) = worker(store), worker(store)
    await first_reloader.tick()
    await second_reloader.tick()
    busy_id = next(view.account_id for view in first.health() if view.label == "busy")

    first.report_failure(busy_id, FailureKind.THROTTLED, retry_after=120)
    await first_reloader.tick()
    await second_reloader.tick()
    assert health(second) == {"busy": "throttled", "spare": "ready"}
    assert second.pick().account_id == spare.id  # the other worker no longer sends it traffic
    rest = next(view for view in second.health() if view.label == "busy")
    assert 100 < rest.resting_for <= 120

    await first_reloader.tick()  # reading its own cool-down back changes nothing
    assert health(first) == {"busy": "throttled", "spare": "ready"}

    first.report_success(busy_id)  # Amazon Q served it again: the rest ends everywhere
    await first_reloader.tick()
    await second_reloader.tick()
    assert health(second) == {"busy": "ready", "spare": "ready"}
    await first_reloader.tick()
    assert health(first) == {"busy": "ready", "spare": "ready"}
