"""The shared database fails (down, frozen) while the account's token is inside its refresh window.

The real gateway on loopback reaches a real PostgreSQL / MariaDB server through
a TCP proxy the test cuts (down: connections dropped and refused) or freezes
(accepted, never forwarded). The simulated token service hands out tokens for
two minutes, inside the five-minute refresh margin: every request wants a
refresh, which needs the store's lock. The access token is still valid, so
every request must be served all the same, and the refresh must happen once
the store is back.

Also here, on the same rig: admin calls during an outage (503 in the admin
envelope), a refresh or an added account whose tokens rotated while the store
went down (kept, written later), fields the store would refuse (400 before the
refresh), forty concurrent admin refreshes (one refresh), bounded lock
connections, a row sealed with another key, and a store frozen at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from q2api.accounts import store_schema, tokens
from q2api.accounts.opening import open_account_store
from q2api.accounts.records import ENV_ACCOUNT_ID
from q2api.store import database
from q2api.store.errors import StoreUnavailable
from q2api.store.shared_database import SharedDatabase
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, run_sql, scratch_database_url
from tests.support.fault_proxy import FaultProxy, fault_proxy
from tests.support.gateway_harness import ADMIN_KEY, ask, capture_logs, find_secrets, gateway_settings, sdk

# Every test here starts a gateway and a database connection; the tiers cannot see it through the
# asynccontextmanager helper below, so the marker is set by hand.
pytestmark = pytest.mark.slow

# The database deadline while the store is down or frozen: each request that waits for the store waits
# this long. Only then: on a loaded machine, the start-up's first writes once took longer than this.
OUTAGE_DEADLINE = 2.0
GATEWAY_DEADLINE = database.UNIT_DEADLINE  # the gateway's own, at other times
OUTAGE_WARNING = "cannot refresh the access token while the account store fails"
HANG_GUARD = 60.0  # a request that has not ended by then hangs: the test fails instead of waiting forever


@dataclasses.dataclass
class Faulty:
    url: str  # the gateway's
    sim: SimulatedUpstream
    proxy: FaultProxy
    database_url: str  # the real server's, around the proxy

    async def ask(self, text: str) -> str:
        return await asyncio.wait_for(ask(sdk(self.url), text), HANG_GUARD)

    async def cut(self) -> None:
        """The store goes down (its deadline short while it is)."""
        database.UNIT_DEADLINE = OUTAGE_DEADLINE
        await self.proxy.cut()

    def freeze(self) -> None:
        """The store stops answering (its deadline short while it does)."""
        database.UNIT_DEADLINE = OUTAGE_DEADLINE
        self.proxy.freeze()

    async def restore(self) -> None:
        await self.proxy.restore()
        database.UNIT_DEADLINE = GATEWAY_DEADLINE


@pytest.fixture(autouse=True)
def outage_deadlines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shared store reads `database.UNIT_DEADLINE` at each unit of work (it is read once, when the
    engine is made, in the gateway), so that `Faulty.cut()`/`freeze()` can shorten it for the outage alone."""
    monkeypatch.setattr(database, "UNIT_DEADLINE", GATEWAY_DEADLINE)  # put back after the test
    live = property(lambda self: database.UNIT_DEADLINE, lambda self, value: None)
    monkeypatch.setattr(SharedDatabase, "deadline", live, raising=False)
    monkeypatch.setattr(tokens, "STORE_RETRY_DELAY", 0.2, raising=False)
    monkeypatch.setattr(tokens, "STORE_RETRY_DELAY_MAX", 0.4, raising=False)


@contextlib.asynccontextmanager
async def faulty_gateway(kind: str, tmp_path: Path) -> AsyncIterator[Faulty]:
    async with SimulatedUpstream(check_tokens=True, rotate_refresh_tokens=True, token_lifetime=120) as sim:
        sim.valid_refresh_tokens = {SIM_REFRESH_TOKEN}
        with scratch_database_url(kind) as database_url:
            async with fault_proxy(database_url) as proxy:
                settings = gateway_settings(
                    sim,
                    tmp_path,
                    Q2API_DATABASE_URL=proxy.url_through(database_url),
                    Q2API_SECRET_KEY=TEST_SECRET_KEY,
                    Q2API_ADMIN_KEY=ADMIN_KEY,
                )
                async with running_gateway(settings) as url:
                    yield Faulty(url, sim, proxy, database_url)


async def stored_refresh_token(database_url: str) -> str | None:
    """The refresh token in the database, read directly (not through the proxy); None while it cannot be read.

    The probe polls right after the proxy comes back, while the gateway's own sessions are still
    being re-established: a probe that misses its short deadline once is asked again, not a failure.
    """
    try:
        store = await open_account_store(database_url, "unused", TEST_SECRET_KEY)
    except StoreUnavailable:
        return None
    try:
        account = await store.get(ENV_ACCOUNT_ID)
        return account.refresh_token if account else None
    except StoreUnavailable:
        return None
    finally:
        await store.close()


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_a_database_that_goes_down_in_the_refresh_window_serves_on_the_valid_token(kind, tmp_path) -> None:
    with capture_logs() as logs:
        async with faulty_gateway(kind, tmp_path) as gw:
            assert "first" in await gw.ask("first")
            refreshes = gw.sim.refresh_calls
            await gw.cut()
            for n in range(4):
                assert f"down {n}" in await gw.ask(f"down {n}")
                await asyncio.sleep(0.25)  # past a retry delay: the refresh is tried again, and fails again
            assert gw.sim.refresh_calls == refreshes  # no refresh without the store's lock

            await gw.restore()
            await asyncio.sleep(0.5)  # the retry delay has passed: the next request refreshes
            assert "back" in await gw.ask("back")
            assert gw.sim.refresh_calls > refreshes
            (newest,) = gw.sim.valid_refresh_tokens
            assert await stored_refresh_token(gw.database_url) == newest

    statuses = [line.extra["status"] for line in logs.request_lines()]
    assert statuses == [200] * 6
    assert sum(OUTAGE_WARNING in line.message for line in logs.lines) == 1  # once for the whole outage
    assert any("account store answers again" in line.message for line in logs.lines)
    assert find_secrets(logs.text) == []


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_a_frozen_database_in_the_refresh_window_neither_hangs_nor_fails_requests(kind, tmp_path) -> None:
    with capture_logs() as logs:
        async with faulty_gateway(kind, tmp_path) as gw:
            assert "first" in await gw.ask("first")
            refreshes = gw.sim.refresh_calls
            gw.freeze()
            for n in range(3):
                assert f"frozen {n}" in await gw.ask(f"frozen {n}")
            assert gw.sim.refresh_calls == refreshes
            await gw.restore()
            await asyncio.sleep(0.5)
            assert "thawed" in await gw.ask("thawed")
            assert gw.sim.refresh_calls > refreshes

    assert [line.extra["status"] for line in logs.request_lines()] == [200] * 5
    assert sum(OUTAGE_WARNING in line.message for line in logs.lines) == 1
    assert find_secrets(logs.text) == []


async def test_an_expired_token_with_the_database_down_is_a_503_not_a_500(tmp_path) -> None:
    async with faulty_gateway("postgresql", tmp_path) as gw:
        assert "first" in await gw.ask("first")
        await gw.cut()
        gw.sim.revoke_access_tokens()  # Amazon Q refuses the token: only a refresh could serve now
        async with httpx2.AsyncClient(base_url=gw.url, timeout=HANG_GUARD) as http:
            reply = await http.post(
                "/v1/messages",
                headers={"x-api-key": "q2api-test-client-key-5f1e9a7c", "content-type": "application/json"},
                json={"model": "claude-sonnet-5-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
            )
        assert reply.status_code == 503, reply.text
        assert "account store is unavailable" in reply.json()["error"]["message"]


def admin(gw: Faulty) -> httpx2.AsyncClient:
    headers = {"authorization": f"Bearer {ADMIN_KEY}", "content-type": "application/json"}
    return httpx2.AsyncClient(base_url=gw.url + "/admin/api", headers=headers, timeout=HANG_GUARD)


@pytest.mark.parametrize("fault", ["down", "frozen"])
async def test_admin_calls_during_a_store_outage_are_503_in_the_admin_envelope_with_one_log_line(
    fault, tmp_path
) -> None:
    async with faulty_gateway("postgresql", tmp_path) as gw, admin(gw) as http:
        assert (await http.get("/accounts")).status_code == 200
        if fault == "down":
            await gw.cut()
        else:
            gw.freeze()
        with capture_logs() as logs:
            listing = await http.get("/accounts")
            refresh = await http.post(f"/accounts/{ENV_ACCOUNT_ID}/refresh")
        for reply in (listing, refresh):
            assert reply.status_code == 503, reply.text
            assert reply.json()["error"]["type"] == "store_unavailable"
            assert "account store is unavailable" in reply.json()["error"]["message"]
        admin_lines = [line for line in logs.lines if "admin request" in line.message]
        assert len(admin_lines) == 2  # one per call
        assert "Traceback" not in logs.text
        assert find_secrets(logs.text) == []


async def test_an_admin_refresh_that_succeeded_while_the_store_went_down_says_so_and_keeps_the_token(
    tmp_path,
) -> None:
    async with faulty_gateway("postgresql", tmp_path) as gw, admin(gw) as http:
        assert "first" in await gw.ask("first")
        gw.sim.refresh_delay = 1.0

        async def cut_during_the_refresh() -> None:
            refreshes = gw.sim.refresh_calls
            assert await gw.sim.wait_until(lambda: gw.sim.refresh_calls > refreshes, timeout=HANG_GUARD)
            await gw.cut()

        cutter = asyncio.create_task(cut_during_the_refresh())
        reply = await http.post(f"/accounts/{ENV_ACCOUNT_ID}/refresh")
        await cutter
        assert reply.status_code == 200, reply.text
        assert reply.json()["saved"] is False
        assert "store did not take the new tokens" in reply.json()["detail"]
        (newest,) = gw.sim.valid_refresh_tokens
        assert newest != SIM_REFRESH_TOKEN

        gw.sim.refresh_delay = 0.0
        assert "served" in await gw.ask("served")  # from the tokens in memory
        await gw.restore()
        for _ in range(400):  # the background write, within seconds of the store's return
            if await stored_refresh_token(gw.database_url) == newest:
                break
            await asyncio.sleep(0.05)
        assert await stored_refresh_token(gw.database_url) == newest


@pytest.mark.parametrize(
    ("field", "value"),
    [("label", "x" * 256), ("label", "nul\x00label"), ("profile_arn", "arn:" + "p" * 600), ("region", "us-east-1\n")],
)
async def test_adding_an_account_the_store_would_refuse_is_a_400_before_the_refresh_burns_the_token(
    field, value, tmp_path
) -> None:
    async with faulty_gateway("postgresql", tmp_path) as gw, admin(gw) as http:
        gw.sim.valid_refresh_tokens.add("sim-refresh-new-login")
        refreshes = gw.sim.refresh_calls
        body = {"label": "fine", "refresh_token": "sim-refresh-new-login", field: value}
        reply = await http.post("/accounts", json=body)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["type"] == "invalid_request"
        assert field in reply.json()["error"]["message"]
        assert gw.sim.refresh_calls == refreshes  # the token was never spent
        assert "sim-refresh-new-login" in gw.sim.valid_refresh_tokens


async def test_an_added_account_the_store_cannot_take_after_its_refresh_is_kept_and_stored_later(
    tmp_path, monkeypatch
) -> None:
    from q2api.accounts import onboarding

    monkeypatch.setattr(onboarding, "WRITE_RETRY_DELAYS", (0.1,))
    async with faulty_gateway("postgresql", tmp_path) as gw, admin(gw) as http:
        gw.sim.valid_refresh_tokens.add("sim-refresh-new-login")
        gw.sim.refresh_delay = 1.0

        async def cut_during_the_refresh() -> None:
            refreshes = gw.sim.refresh_calls
            assert await gw.sim.wait_until(lambda: gw.sim.refresh_calls > refreshes, timeout=HANG_GUARD)
            await gw.cut()

        cutter = asyncio.create_task(cut_during_the_refresh())
        reply = await http.post("/accounts", json={"label": "second", "refresh_token": "sim-refresh-new-login"})
        await cutter
        assert reply.status_code == 202, reply.text
        assert reply.json()["status"] == "pending"
        assert "sim-refresh-new-login" not in gw.sim.valid_refresh_tokens  # rotated by the verifying refresh
        await gw.restore()
        store = await open_account_store(gw.database_url, "unused", TEST_SECRET_KEY)
        try:
            for _ in range(200):
                labels = {account.label: account for account in await store.accounts()}
                if "second" in labels:
                    break
                await asyncio.sleep(0.05)
            assert labels["second"].refresh_token in gw.sim.valid_refresh_tokens  # the rotated one, kept
        finally:
            await store.close()


async def test_forty_admin_refreshes_of_one_account_are_one_refresh_shared_by_all(tmp_path) -> None:
    # Forty admin calls read the store at once, with the gateway's own deadline (no outage here).
    async with faulty_gateway("postgresql", tmp_path) as gw, admin(gw) as http:
        gw.sim.refresh_delay = 0.5
        refreshes = gw.sim.refresh_calls
        replies = await asyncio.gather(*(http.post(f"/accounts/{ENV_ACCOUNT_ID}/refresh") for _ in range(40)))
        assert [reply.status_code for reply in replies] == [200] * 40
        assert len({reply.json()["token_expires_at"] for reply in replies}) == 1  # one result, shared
        assert gw.sim.refresh_calls == refreshes + 1


async def test_lock_connections_are_bounded_per_process() -> None:
    with scratch_database_url("postgresql") as database_url:
        async with fault_proxy(database_url) as proxy:
            store = await open_account_store(proxy.url_through(database_url), "unused", TEST_SECRET_KEY)
            holding = peak_holders = peak_connections = 0

            async def hold(account_id: str) -> None:
                nonlocal holding, peak_holders, peak_connections
                async with store.refresh_lock(account_id):
                    holding += 1
                    peak_holders = max(peak_holders, holding)
                    peak_connections = max(peak_connections, proxy.open_connections)
                    await asyncio.sleep(0.1)
                    holding -= 1

            try:
                await asyncio.wait_for(asyncio.gather(*(hold(f"account-{n}") for n in range(12))), HANG_GUARD)
            finally:
                await store.close()
    assert peak_holders == database.LOCK_CONNECTIONS
    assert peak_connections <= database.LOCK_CONNECTIONS + 1  # + the pooled connection start-up used


async def test_a_row_sealed_with_another_key_leaves_the_gateway_following_the_store(tmp_path) -> None:
    other_key_row = Fernet(Fernet.generate_key()).encrypt(b"a refresh token").decode()
    with capture_logs() as logs:
        async with faulty_gateway("postgresql", tmp_path) as gw:
            store = await open_account_store(gw.database_url, "unused", TEST_SECRET_KEY)
            try:
                bad = await store.add(auth_method="social", refresh_token="r-bad", label="sealed-elsewhere")
                table = store_schema.accounts
                reseal = sa.update(table).where(table.c.id == bad.id).values(refresh_token=other_key_row)
                run_sql(gw.database_url, lambda db: db.execute(reseal))
                await asyncio.sleep(1.0)  # a few reload ticks with the bad row in the store
                await store.update(ENV_ACCOUNT_ID, enabled=False)  # another replica disables the account
            finally:
                await store.close()
            async with httpx2.AsyncClient(base_url=gw.url, timeout=HANG_GUARD) as http:
                for _ in range(200):
                    health = (await http.get("/healthz")).json()
                    if not health["accounts"]:
                        break
                    await asyncio.sleep(0.05)
                assert health["accounts"] == []  # the disabled account left the pool: nothing stale serves
                assert (await http.get("/readyz")).status_code == 503  # not ready: no enabled account
    skipped = [line for line in logs.lines if "is skipped" in line.message]
    assert len(skipped) == 1 and bad.id in skipped[0].message
    assert "r-bad" not in logs.text and find_secrets(logs.text) == []


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_a_store_frozen_at_start_up_is_a_clear_error_within_the_connect_timeout(kind) -> None:
    with scratch_database_url(kind) as database_url:
        async with fault_proxy(database_url) as proxy:
            proxy.freeze()
            database.UNIT_DEADLINE = OUTAGE_DEADLINE
            with pytest.raises(StoreUnavailable, match=r"did not answer|TimeoutError"):
                # The drivers' own connect timeouts are a minute (asyncpg) or more: far past this guard.
                await asyncio.wait_for(
                    open_account_store(proxy.url_through(database_url), "unused", TEST_SECRET_KEY), 30
                )
