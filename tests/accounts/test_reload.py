"""Hot reload: pools on one store (as workers are) follow every account change; stats add up."""

from __future__ import annotations

from pathlib import Path

from q2api.accounts.pool import AccountPool
from q2api.accounts.records import Account, AccountStatus
from q2api.accounts.reload import AccountReloader
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.tokens import TokenManager


async def _never_refresh(account: Account):  # pragma: no cover - nothing here refreshes
    raise AssertionError("no refresh expected")


def worker(store: SqliteAccountStore) -> tuple[AccountPool, AccountReloader]:
    """One worker's pool and reloader, built the way the app builds them."""
    pool = AccountPool([], factory=lambda account: TokenManager(account, store, _never_refresh))
    return pool, AccountReloader(store, pool, interval=0.01)


def serving(pool: AccountPool) -> list[str]:
    return [manager.label for manager in pool.managers()]


async def test_every_change_reaches_the_pool_on_the_next_tick(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    pool, reloader = worker(store)
    await reloader.tick()
    assert serving(pool) == []

    first = await store.add(auth_method="social", refresh_token="r1", label="one")
    second = await store.add(auth_method="social", refresh_token="r2", label="two")
    await reloader.tick()
    assert serving(pool) == ["one", "two"]
    kept = pool.manager(first.id)

    await store.update(first.id, label="renamed")
    await store.update(second.id, enabled=False)
    await reloader.tick()
    assert serving(pool) == ["renamed"]
    assert pool.manager(first.id) is kept  # the same manager (and its token state), following the row

    await store.update(second.id, enabled=True)
    await store.remove(first.id)
    await reloader.tick()
    assert serving(pool) == ["two"]


async def test_an_unchanged_store_is_not_reread(tmp_path: Path, monkeypatch) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.add(auth_method="social", refresh_token="r1", label="one")
    pool, reloader = worker(store)
    await reloader.tick()
    reads = []

    async def counted_read() -> list[Account]:
        reads.append(1)
        return []

    monkeypatch.setattr(store, "accounts", counted_read)
    await reloader.tick()
    assert reads == [] and serving(pool) == ["one"]


async def test_a_login_marked_elsewhere_stops_the_account_here(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    account = await store.add(auth_method="social", refresh_token="r1", label="one")
    pool, reloader = worker(store)
    await reloader.tick()
    await store.set_status(account.id, AccountStatus.NEEDS_LOGIN, "invalid_grant")
    await reloader.tick()
    assert [view.health for view in pool.health()] == ["needs_login"]
    assert pool.unready_reason() == "no account can serve now: 1 needs_login"

    await store.add(auth_method="social", refresh_token="r-new", label="one", account_id=account.id)  # a new login
    await reloader.tick()
    assert [view.health for view in pool.health()] == ["ready"] and pool.unready_reason() is None


async def test_two_workers_counts_add_up_in_the_store(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    account = await store.add(auth_method="social", refresh_token="r1", label="one")
    (pool_a, reloader_a), (pool_b, reloader_b) = worker(store), worker(store)
    await reloader_a.tick()
    await reloader_b.tick()
    pool_a.report_success(account.id)
    pool_a.report_failure(account.id, None, detail="the token service is unreachable")
    pool_b.report_success(account.id)
    await reloader_a.tick()
    await reloader_b.tick()
    stats = (await store.read_stats())[account.id]
    assert (stats.requests, stats.failures, stats.last_error) == (3, 1, "the token service is unreachable")
    assert stats.last_used_at is not None

    await store.remove(account.id)
    assert account.id not in await store.read_stats()


async def test_a_worker_alone_keeps_its_used_up_credits_rest_across_ticks_and_tells_no_story_of_other_workers(
    tmp_path: Path,
) -> None:
    from tests.support.gateway_harness import capture_logs

    store = SqliteAccountStore(tmp_path)
    account = await store.add(auth_method="social", refresh_token="r1", label="one")
    pool, reloader = worker(store)
    await reloader.tick()
    with capture_logs() as logs:
        pool.rest_until_reset(account.id, 600)  # its credits are used up (read from getUsageLimits)
        for _ in range(3):
            await reloader.tick()
    assert [view.health for view in pool.health()] == ["quota_exhausted"]
    assert not [line for line in logs.lines if "another worker" in line.message or "rests no more" in line.message]
    assert [line.level for line in logs.lines if "rests" in line.message] == ["WARNING"]  # one line, one event


async def test_a_worker_alone_is_never_told_its_own_earlier_rest_is_another_workers(tmp_path: Path) -> None:
    from q2api.amazonq.errors import FailureKind
    from tests.support.gateway_harness import capture_logs

    store = SqliteAccountStore(tmp_path)
    account = await store.add(auth_method="social", refresh_token="r1", label="one")
    pool, reloader = worker(store)
    pool.failure_limit = 1
    await reloader.tick()
    with capture_logs() as logs:
        pool.report_failure(account.id, None)  # Amazon Q unreachable: rests FAILURE_COOLDOWN (300 s)
        await reloader.tick()
        pool.report_failure(account.id, FailureKind.THROTTLED, retry_after=10)  # newer, and shorter
        for _ in range(3):
            await reloader.tick()
    [view] = pool.health()
    assert view.health == "throttled" and view.resting_for <= 10  # the newer rest holds
    assert not [
        line for line in logs.lines if "another worker" in line.message or "in the account store" in line.message
    ]
