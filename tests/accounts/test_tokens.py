from __future__ import annotations

import asyncio
import functools
import multiprocessing
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from q2api.accounts.records import ENV_ACCOUNT_ID, Account, AccountStatus, EnvAccount
from q2api.accounts.refresh import RefreshEndpoints, refresh_access_token
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.errors import RefreshRejected, RefreshUnavailable
from q2api.testing.simulated_upstream import (
    SIM_CLIENT_ID,
    SIM_CLIENT_SECRET,
    SIM_PROFILE_ARN,
    SimulatedUpstream,
)

REFRESH_SECRET = "refresh-SECRET-0"


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedUpstream]:
    async with SimulatedUpstream() as simulator:
        yield simulator


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def seed(store: SqliteAccountStore, auth_method: str = "idc", refresh_token: str = REFRESH_SECRET):
    return await store.seed_from_env(
        EnvAccount(
            auth_method=auth_method,
            refresh_token=refresh_token,
            client_id=SIM_CLIENT_ID if auth_method == "idc" else None,
            client_secret=SIM_CLIENT_SECRET if auth_method == "idc" else None,
        )
    )


async def manager_for(store: SqliteAccountStore, session, sim: SimulatedUpstream, clock=time.time) -> TokenManager:
    account = await store.get(ENV_ACCOUNT_ID)
    assert account is not None
    endpoints = RefreshEndpoints(oidc=sim.oidc_url, kiro=sim.kiro_refresh_url)
    return TokenManager(
        account, store, functools.partial(refresh_access_token, session, endpoints=endpoints), clock=clock
    )


async def test_first_call_refreshes_and_later_calls_reuse(tmp_path: Path, sim, session) -> None:
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    manager = await manager_for(store, session, sim)
    token = await manager.access_token()
    assert token in sim.valid_access_tokens
    assert await manager.access_token() == token
    assert sim.refresh_calls == 1
    request = sim.refresh_requests[0]
    assert request.path == "/token"
    assert request.body == {
        "clientId": SIM_CLIENT_ID,
        "clientSecret": SIM_CLIENT_SECRET,
        "grantType": "refresh_token",
        "refreshToken": REFRESH_SECRET,
    }
    stored = await store.get(ENV_ACCOUNT_ID)
    assert stored is not None and stored.access_token == token and stored.expires_at > time.time() + 3000


async def test_refreshes_ahead_of_expiry(tmp_path: Path, sim, session) -> None:
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="old-access", expires_at=time.time() + 1000)
    now = [time.time()]
    manager = await manager_for(store, session, sim, clock=lambda: now[0])
    assert await manager.access_token() == "old-access"
    assert sim.refresh_calls == 0
    now[0] += 750  # 250 s left: inside the 300 s margin
    fresh = await manager.access_token()
    assert fresh != "old-access" and sim.refresh_calls == 1


async def test_twenty_concurrent_callers_cause_one_refresh(tmp_path: Path, sim, session) -> None:
    sim.refresh_delay = 0.05
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="expired", expires_at=time.time() - 10)
    manager = await manager_for(store, session, sim)
    tokens = await asyncio.gather(*(manager.access_token() for _ in range(20)))
    assert sim.refresh_calls == 1
    assert len(set(tokens)) == 1 and tokens[0] in sim.valid_access_tokens


async def test_two_workers_share_one_refresh_through_the_store(tmp_path: Path, sim, session) -> None:
    sim.refresh_delay = 0.05
    await seed(SqliteAccountStore(tmp_path))
    worker_a = await manager_for(SqliteAccountStore(tmp_path), session, sim)
    worker_b = await manager_for(SqliteAccountStore(tmp_path), session, sim)
    token_a, token_b = await asyncio.gather(worker_a.access_token(), worker_b.access_token())
    assert token_a == token_b
    assert sim.refresh_calls == 1


def _worker_process(data_dir: str, oidc: str, kiro: str, results) -> None:  # runs in a forked child
    async def run() -> str:
        store = SqliteAccountStore(data_dir)
        account = await store.get(ENV_ACCOUNT_ID)
        async with aiohttp.ClientSession() as client:
            refresh = functools.partial(refresh_access_token, client, endpoints=RefreshEndpoints(oidc=oidc, kiro=kiro))
            return await TokenManager(account, store, refresh).access_token()

    results.put(asyncio.run(run()))


def test_two_processes_share_one_refresh(tmp_path: Path) -> None:
    handle = SimulatedUpstream.run_in_thread(refresh_delay=0.2, rotate_refresh_tokens=True)
    try:
        handle.sim.valid_refresh_tokens = {REFRESH_SECRET}
        asyncio.run(seed(SqliteAccountStore(tmp_path)))
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        processes = [
            context.Process(
                target=_worker_process, args=(str(tmp_path), handle.sim.oidc_url, handle.sim.kiro_refresh_url, results)
            )
            for _ in range(3)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(30)
        assert [process.exitcode for process in processes] == [0, 0, 0]
        tokens = {results.get(timeout=5) for _ in processes}
        assert len(tokens) == 1  # all adopted the one refreshed token
        assert handle.sim.refresh_calls == 1  # a second refresh would also have hit a retired refresh token
    finally:
        handle.stop()


async def test_rejection_refreshes_once_and_only_for_the_current_token(tmp_path: Path, sim, session) -> None:
    sim.refresh_delay = 0.02
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    manager = await manager_for(store, session, sim)
    first = await manager.access_token()
    assert sim.refresh_calls == 1

    replacements = await asyncio.gather(*(manager.refresh_after_rejection(first) for _ in range(10)))
    assert sim.refresh_calls == 2
    assert len(set(replacements)) == 1 and replacements[0] != first

    # A late request still holding the first token gets the replacement without a refresh.
    assert await manager.refresh_after_rejection(first) == replacements[0]
    assert sim.refresh_calls == 2


async def test_invalidate_forces_a_refresh(tmp_path: Path, sim, session) -> None:
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    manager = await manager_for(store, session, sim)
    first = await manager.access_token()
    manager.invalidate("some-other-token")
    assert await manager.access_token() == first
    manager.invalidate(first)
    assert await manager.access_token() != first
    assert sim.refresh_calls == 2


async def test_rotated_refresh_token_is_persisted_and_used_next(tmp_path: Path, sim, session) -> None:
    sim.rotate_refresh_tokens = True
    sim.valid_refresh_tokens = {REFRESH_SECRET}
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    manager = await manager_for(store, session, sim)
    first = await manager.access_token()
    stored = await store.get(ENV_ACCOUNT_ID)
    assert stored is not None and stored.refresh_token != REFRESH_SECRET
    assert stored.refresh_token in sim.valid_refresh_tokens

    # A restart with the same env token keeps the rotated one, and refreshing with it works.
    restarted = SqliteAccountStore(tmp_path)
    await seed(restarted)
    again = await manager_for(restarted, session, sim)
    again.invalidate(first)
    assert await again.refresh_after_rejection(first) != first
    assert sim.refresh_requests[-1].body["refreshToken"] == stored.refresh_token


async def test_invalid_grant_raises_refresh_rejected_for_the_operator(tmp_path: Path, sim, session, log_lines) -> None:
    sim.valid_refresh_tokens = set()  # nothing is valid: invalid_grant
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    now = [time.time()]
    manager = await manager_for(store, session, sim, clock=lambda: now[0])
    with pytest.raises(RefreshRejected) as caught:
        await manager.access_token()
    message = str(caught.value)
    assert "q2api accounts add" in message and "invalid_grant" in message
    assert REFRESH_SECRET not in message and SIM_CLIENT_SECRET not in message
    assert (await store.get(ENV_ACCOUNT_ID)).status is AccountStatus.NEEDS_LOGIN
    assert manager.needs_login

    # Further requests fail fast, without hammering the token service.
    with pytest.raises(RefreshRejected):
        await manager.access_token()
    assert sim.refresh_calls == 1

    # The operator stores a fresh login; the running manager picks it up.
    sim.valid_refresh_tokens = {"fresh-login-token"}
    await store.add(
        auth_method="idc",
        refresh_token="fresh-login-token",
        client_id=SIM_CLIENT_ID,
        client_secret=SIM_CLIENT_SECRET,
        account_id=ENV_ACCOUNT_ID,
    )
    now[0] += 10
    assert await manager.access_token() in sim.valid_access_tokens
    assert not manager.needs_login
    assert not any(REFRESH_SECRET in line or SIM_CLIENT_SECRET in line for line in log_lines)


async def test_invalid_client_is_rejected_too(tmp_path: Path, sim, session) -> None:
    sim.refresh_failure = "invalid_client"
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    with pytest.raises(RefreshRejected, match="invalid_client"):
        await (await manager_for(store, session, sim)).access_token()


async def test_token_service_failure_keeps_the_tokens(tmp_path: Path, sim, session) -> None:
    sim.refresh_failure = "server_error"
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    await store.save_tokens(
        ENV_ACCOUNT_ID, access_token="still-valid", expires_at=time.time() + 100
    )  # inside the margin
    manager = await manager_for(store, session, sim)
    assert await manager.access_token() == "still-valid"  # early refresh failed, the old token still works
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="expired", expires_at=time.time() - 1)
    manager.invalidate("still-valid")
    with pytest.raises(RefreshUnavailable):
        await manager.access_token()
    stored = await store.get(ENV_ACCOUNT_ID)
    assert stored.refresh_token == REFRESH_SECRET and stored.status is AccountStatus.ACTIVE
    sim.refresh_failure = None
    assert await manager.access_token() in sim.valid_access_tokens


async def test_unreachable_token_service_is_unavailable_not_rejected(tmp_path: Path, session) -> None:
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    account = await store.get(ENV_ACCOUNT_ID)
    endpoints = RefreshEndpoints(oidc="http://127.0.0.1:9", kiro="http://127.0.0.1:9/refreshToken", timeout=5)
    manager = TokenManager(account, store, functools.partial(refresh_access_token, session, endpoints=endpoints))
    with pytest.raises(RefreshUnavailable, match="unreachable"):
        await manager.access_token()
    assert (await store.get(ENV_ACCOUNT_ID)).status is AccountStatus.ACTIVE


async def test_kiro_social_refresh_stores_profile_arn(tmp_path: Path, sim, session) -> None:
    store = SqliteAccountStore(tmp_path)
    await seed(store, auth_method="social")
    manager = await manager_for(store, session, sim)
    token = await manager.access_token()
    assert sim.refresh_requests[0].path == "/refreshToken"
    assert sim.refresh_requests[0].body == {"refreshToken": REFRESH_SECRET}
    assert token in sim.valid_access_tokens
    assert manager.profile_arn == SIM_PROFILE_ARN
    assert (await store.get(ENV_ACCOUNT_ID)).profile_arn == SIM_PROFILE_ARN


async def test_kiro_rejection_is_refresh_rejected(tmp_path: Path, sim, session) -> None:
    sim.valid_refresh_tokens = set()
    store = SqliteAccountStore(tmp_path)
    await seed(store, auth_method="social")
    with pytest.raises(RefreshRejected):
        await (await manager_for(store, session, sim)).access_token()


async def test_access_token_without_refresh_token_is_used_until_rejected(tmp_path: Path, sim, session) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.seed_from_env(EnvAccount(auth_method="social", refresh_token=None, access_token="given-access"))
    manager = await manager_for(store, session, sim)
    assert await manager.access_token() == "given-access"
    with pytest.raises(RefreshRejected, match="no refresh token"):
        await manager.refresh_after_rejection("given-access")
    assert sim.refresh_calls == 0


async def test_cancelled_caller_does_not_lose_a_rotated_token(tmp_path: Path, sim, session) -> None:
    sim.refresh_delay = 0.2
    sim.rotate_refresh_tokens = True
    store = SqliteAccountStore(tmp_path)
    await seed(store)
    manager = await manager_for(store, session, sim)
    caller = asyncio.ensure_future(manager.access_token())
    await sim.wait_until(lambda: sim.refresh_calls == 1)
    caller.cancel()  # the client went away mid-refresh
    with pytest.raises(asyncio.CancelledError):
        await caller
    token = await manager.access_token()  # joins the refresh still in flight
    assert sim.refresh_calls == 1
    stored = await store.get(ENV_ACCOUNT_ID)
    assert stored.access_token == token and stored.refresh_token != REFRESH_SECRET


def test_a_kiro_api_key_account_sends_no_profile_even_if_its_row_holds_one(tmp_path) -> None:
    row = Account(
        id="k",
        label="ci",
        auth_method="api_key",
        refresh_token=None,
        client_id=None,
        client_secret=None,
        profile_arn="arn:aws:codewhisperer:us-east-1:1:profile/X",
        access_token="ksk_x",
        expires_at=None,
        status=AccountStatus.ACTIVE,
        status_detail=None,
        token_generation=0,
        created_at=0.0,
        updated_at=0.0,
        refreshed_at=None,
    )
    manager = TokenManager(row, SqliteAccountStore(tmp_path), refresh_access_token)  # type: ignore[arg-type]
    assert manager.profile_arn is None and manager.auth_kind == "api_key"
