"""Three `q2api serve` replicas on one shared database (PostgreSQL, then MariaDB/MySQL).

The story: a burst of requests goes through all three replicas; mid-burst the
shared access token expires (Amazon Q refuses it), so every replica wants a
new one at the same moment; exactly one replica refreshes it (the simulated
token service rotates the refresh token and refuses a retired one) and the
other two take the new token from the store; then one replica is killed with
SIGKILL. No request through the other two may be lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from q2api.accounts.opening import open_account_store
from q2api.accounts.store_protocol import AccountStore
from q2api.testing.simulated_upstream import (
    SIM_CLIENT_ID,
    SIM_CLIENT_SECRET,
    SIM_REFRESH_TOKEN,
    SimulatedUpstream,
)
from q2api.testing.simulation_thread import SimulationThread
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, scratch_database_url
from tests.support.gateway_harness import MODEL, find_secrets
from tests.support.serve_process import CLIENT_KEY, ServeProcess, serve

REPLICAS = 3
SENDERS_PER_REPLICA = 2
PASSWORD = "hunter2-DB-PASSWORD"  # PostgreSQL's trust auth ignores it; it must never reach a log


@contextlib.contextmanager
def replicas(tmp_path: Path, env: dict[str, str]) -> Iterator[list[ServeProcess]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(serve(tmp_path, env)) for _ in range(REPLICAS)]


class Burst:
    """Requests through every replica until `stop`; each outcome kept per replica."""

    def __init__(self, targets: list[ServeProcess]) -> None:
        self.outcomes: dict[str, list[str]] = {replica.base_url: [] for replica in targets}
        self._targets = targets
        self._running = True

    async def run(self) -> None:
        await asyncio.gather(*(self._send(replica, n) for replica in self._targets for n in range(SENDERS_PER_REPLICA)))

    def stop(self) -> None:
        self._running = False

    def served(self, replica: ServeProcess) -> int:
        return self.outcomes[replica.base_url].count("ok")

    async def _send(self, replica: ServeProcess, sender: int) -> None:
        client = anthropic.AsyncAnthropic(base_url=replica.base_url, api_key=CLIENT_KEY, max_retries=0, timeout=30)
        serial = 0
        while self._running:
            serial += 1
            prompt = f"{replica.base_url}-{sender}-{serial}"
            try:
                message = await client.messages.create(
                    model=MODEL, max_tokens=50, messages=[{"role": "user", "content": prompt}]
                )
                text = message.content[0].text if message.content and message.content[0].type == "text" else ""
                self.outcomes[replica.base_url].append("ok" if prompt in text else f"wrong reply: {text[:80]!r}")
            except anthropic.APIError as exc:
                self.outcomes[replica.base_url].append(f"{type(exc).__name__}: {exc}"[:200])
            await asyncio.sleep(0.05)
        await client.close()


async def wait_for(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_three_replicas_refresh_once_and_survive_a_killed_one(kind: str, tmp_path: Path) -> None:
    with (
        scratch_database_url(kind) as database_url,
        SimulatedUpstream.run_in_thread(check_tokens=True, rotate_refresh_tokens=True, refresh_delay=0.3) as upstream,
    ):
        if kind == "postgresql":
            database_url = database_url.replace("postgres@", f"postgres:{PASSWORD}@", 1)
        sim = upstream.sim
        sim.valid_refresh_tokens = {SIM_REFRESH_TOKEN}  # a rotated-away token is refused from then on
        store = await open_account_store(database_url, tmp_path, TEST_SECRET_KEY)
        first_token = sim.issue_access_token()
        account = await store.add(
            auth_method="idc",
            refresh_token=SIM_REFRESH_TOKEN,
            client_id=SIM_CLIENT_ID,
            client_secret=SIM_CLIENT_SECRET,
            label="shared",
            access_token=first_token,
            expires_at=time.time() + 3600,
        )
        env = {
            "AMAZONQ_ENDPOINT": sim.url,
            "AMAZONQ_OIDC_ENDPOINT": sim.oidc_url,
            "Q2API_DATABASE_URL": database_url,
            "Q2API_SECRET_KEY": TEST_SECRET_KEY,
        }
        with replicas(tmp_path, env) as started:
            await run_the_story(started, store, account.id, first_token, upstream)
            survivors = started[:2]
        logs = {replica.base_url: "\n".join(replica.lines) for replica in started}
        final = await store.get(account.id)
        await store.close()

    assert sim.refresh_calls == 1, [request.body for request in sim.refresh_requests]
    assert sim.retired_refresh_uses == 0
    assert final is not None and final.refresh_token in (sim.valid_refresh_tokens or ())
    assert final.access_token in sim.valid_access_tokens and final.access_token != first_token
    for replica in survivors:
        log = logs[replica.base_url]
        assert "Traceback" not in log, log
        assert PASSWORD not in log and TEST_SECRET_KEY not in log
        assert find_secrets(log) == []
        assert "account store: " in log


async def run_the_story(
    started: list[ServeProcess], store: AccountStore, account_id: str, first_token: str, upstream: SimulationThread
) -> None:
    sim = upstream.sim
    burst = Burst(started)
    sending = asyncio.create_task(burst.run())
    try:
        await wait_for(lambda: all(burst.served(replica) >= 3 for replica in started), "every replica to serve")
        # The shared access token expires: Amazon Q refuses it from now on, on every replica at once.
        upstream.revoke_access_token(first_token)
        await wait_for(lambda: sim.refresh_calls >= 1, "the refresh")
        served_before_kill = {replica.base_url: burst.served(replica) for replica in started}
        await wait_for(
            lambda: all(burst.served(r) >= served_before_kill[r.base_url] + 3 for r in started), "serving after it"
        )
        started[2].kill()
        served_at_kill = {replica.base_url: burst.served(replica) for replica in started[:2]}
        await asyncio.sleep(3.0)  # longer than a reload tick: the survivors keep going without the dead one
    finally:
        burst.stop()
        await sending
    for replica in started[:2]:
        failures = [outcome for outcome in burst.outcomes[replica.base_url] if outcome != "ok"]
        assert failures == [], (replica.base_url, failures[:5])
        assert burst.served(replica) > served_at_kill[replica.base_url] + 5
