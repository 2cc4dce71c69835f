"""The account pool on its own: selection order and cool-downs (no network)."""

from __future__ import annotations

from pathlib import Path

from q2api.accounts.pool import FAILURE_COOLDOWN, QUOTA_COOLDOWN, AccountPool, build_account_pool
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.errors import FailureKind
from q2api.server.wiring import env_account, refresh_endpoints
from q2api.settings import load_settings
from tests.support.stores import sqlite_store


async def _never_refresh(account):  # pragma: no cover - the pool tests never refresh
    raise AssertionError("no refresh expected")


def make_pool(tmp_path: Path, count: int, now: list[float]) -> AccountPool:
    store = sqlite_store(tmp_path)
    managers = []
    for index in range(count):
        account = store.add(auth_method="social", refresh_token=f"r{index}", account_id=f"acc{index}")
        managers.append(TokenManager(account, store.store, _never_refresh))
    return AccountPool(managers, clock=lambda: now[0])


def test_least_recently_used_first(tmp_path: Path) -> None:
    now = [100.0]
    pool = make_pool(tmp_path, 3, now)
    picked = []
    for _ in range(6):
        now[0] += 1
        picked.append(pool.pick().account_id)
    assert picked == ["acc0", "acc1", "acc2", "acc0", "acc1", "acc2"]


def test_throttled_account_rests_then_returns(tmp_path: Path) -> None:
    now = [100.0]
    pool = make_pool(tmp_path, 2, now)
    pool.report_failure("acc0", FailureKind.THROTTLED, retry_after=10)
    for _ in range(3):
        now[0] += 1
        assert pool.pick().account_id == "acc1"
    assert pool.health()[0].health == "throttled" and pool.health()[0].resting_for == 7
    now[0] += 10
    assert pool.pick().account_id == "acc0"  # rested, and least recently used
    assert pool.health()[0].health == "ready"


def test_repeated_throttling_rests_longer(tmp_path: Path) -> None:
    now = [0.0]
    pool = make_pool(tmp_path, 1, now)
    pool.report_failure("acc0", FailureKind.THROTTLED)
    first = pool.health()[0].resting_for
    pool.report_failure("acc0", FailureKind.THROTTLED)
    assert pool.health()[0].resting_for > first
    pool.report_success("acc0")
    pool.report_failure("acc0", FailureKind.THROTTLED)
    assert pool.health()[0].resting_for == first


def test_all_resting_picks_the_one_back_soonest(tmp_path: Path) -> None:
    now = [0.0]
    pool = make_pool(tmp_path, 2, now)
    pool.report_failure("acc0", FailureKind.MONTHLY_QUOTA)
    pool.report_failure("acc1", FailureKind.THROTTLED)
    assert pool.pick().account_id == "acc1"
    assert not pool.has_alternative(exclude=set())
    assert pool.pick(exclude={"acc0", "acc1"}) is None


def test_failures_that_are_not_the_accounts_do_not_rest_it(tmp_path: Path) -> None:
    now = [0.0]
    pool = make_pool(tmp_path, 1, now)
    for kind in (FailureKind.SERVER_ERROR, FailureKind.BAD_REQUEST, FailureKind.CONTEXT_OVERFLOW):
        pool.report_failure("acc0", kind)
    assert pool.health()[0].health == "ready"


async def test_build_pool_seeds_env_and_skips_disabled(tmp_path: Path) -> None:
    settings = load_settings({"AMAZONQ_REFRESH_TOKEN": "env-r", "Q2API_DATA_DIR": str(tmp_path)}, env_file=None)
    store = SqliteAccountStore(tmp_path)
    await store.add(auth_method="social", refresh_token="x", account_id="off")
    await store.update("off", enabled=False)
    pool = await build_account_pool(store, None, endpoints=refresh_endpoints(settings), seed=env_account(settings))  # type: ignore[arg-type]  # no refresh happens
    assert [manager.account_id for manager in pool.managers()] == ["env"]
    assert env_account(load_settings({}, env_file=None)) is None


def test_any_quota_rests_the_account_for_the_quota_cool_down(tmp_path: Path) -> None:
    now = [0.0]
    pool = make_pool(tmp_path, 2, now)
    pool.report_failure("acc0", FailureKind.OTHER_QUOTA)
    assert [view.health for view in pool.health()] == ["quota_exhausted", "ready"]
    now[0] = QUOTA_COOLDOWN - 1
    assert pool.health()[0].health == "quota_exhausted"
    now[0] = QUOTA_COOLDOWN + 1
    assert pool.health()[0].health == "ready"


def test_consecutive_failures_rest_the_account_once_the_limit_is_reached(tmp_path: Path) -> None:
    now = [0.0]
    pool = make_pool(tmp_path, 2, now)
    pool.failure_limit = 3
    for _ in range(2):
        pool.report_failure("acc0", FailureKind.SERVER_ERROR)
    pool.report_failure("acc0", FailureKind.BAD_REQUEST)  # the request's fault: neither counts nor resets
    assert pool.health()[0].health == "ready"
    pool.report_failure("acc0", None, detail="unreachable")
    assert [view.health for view in pool.health()] == ["failing", "ready"]
    assert pool.health()[0].resting_for == FAILURE_COOLDOWN
    now[0] += 1
    assert pool.pick().account_id == "acc1"


def test_a_success_resets_the_failure_count(tmp_path: Path) -> None:
    now = [0.0]
    pool = make_pool(tmp_path, 1, now)
    pool.failure_limit = 2
    pool.report_failure("acc0", FailureKind.SERVER_ERROR)
    pool.report_success("acc0")
    pool.report_failure("acc0", FailureKind.SERVER_ERROR)
    assert pool.health()[0].health == "ready"


def test_readiness_reasons(tmp_path: Path) -> None:
    now = [0.0]
    assert AccountPool([]).unready_reason() == "no enabled Amazon Q account"
    pool = make_pool(tmp_path, 2, now)
    assert pool.unready_reason() is None
    pool.report_failure("acc0", FailureKind.ACCESS_DENIED)
    pool.report_failure("acc1", FailureKind.MONTHLY_QUOTA)
    assert pool.unready_reason() == "no account can serve now: 1 access_denied, 1 quota_exhausted"


def test_an_account_resting_after_throttling_or_failures_still_makes_the_pool_ready(tmp_path: Path) -> None:
    # Ready means a request would be served now: `pick` still hands a resting account out.
    now = [0.0]
    pool = make_pool(tmp_path, 2, now)
    pool.failure_limit = 1
    pool.report_failure("acc0", FailureKind.THROTTLED, retry_after=10)
    pool.report_failure("acc1", None)  # e.g. Amazon Q unreachable: rests FAILURE_COOLDOWN
    assert {view.health for view in pool.health()} == {"throttled", "failing"}
    assert pool.pick() is not None
    assert pool.unready_reason() is None
    assert pool.resting_note() == "serving on resting accounts: 1 failing, 1 throttled"
    now[0] += FAILURE_COOLDOWN
    assert pool.resting_note() is None
