"""A store key's limits hold across `q2api serve --workers 2` (counted in Redis, and without it in the
store) and across two replicas on PostgreSQL; a key revoked on one replica stops on every one."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.databases import TEST_SECRET_KEY, scratch_database_url
from tests.support.gateway_harness import JSON_BODY, MODEL
from tests.support.rate_windows import ATTEMPTS, in_one_minute
from tests.support.serve_process import serve
from tests.support.tenant_stores import scratch_redis

pytestmark = pytest.mark.asyncio

OTHER_MODEL = "claude-haiku-4-5"
CREDITS_PER_REPLY = 0.1


def request_for(door: str, key: str, model: str = MODEL) -> tuple[str, dict[str, Any], dict[str, str]]:
    if door == "claude":
        body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        return "/v1/messages", body, {**JSON_BODY, "x-api-key": key}
    bearer = {**JSON_BODY, "authorization": f"Bearer {key}"}
    if door == "chat":
        return "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "hi"}]}, bearer
    return "/v1/responses", {"model": model, "input": "hi", "store": False}, bearer


async def statuses(targets: list[str], doors: list[str], key: str, count: int, model: str = MODEL) -> list[int]:
    """`count` requests at once, spread over `targets` (base URLs) and `doors`; their statuses."""
    async with httpx2.AsyncClient(timeout=30) as http:

        async def one(n: int) -> int:
            path, body, headers = request_for(doors[n % len(doors)], key, model)
            return (await http.post(targets[n % len(targets)] + path, json=body, headers=headers)).status_code

        return list(await asyncio.gather(*(one(n) for n in range(count))))


async def make_key(database_url: str | None, data_dir: Path, label: str, **limits: Any) -> str:
    database = await open_tenant_database(database_url, data_dir)
    try:
        key, _record = await KeyStore(database).create(label, KeyLimits(**limits))
    finally:
        await database.close()
    return key


@pytest.mark.parametrize("counted_in", ["redis", "store"])
async def test_one_model_ten_a_minute_and_a_budget_across_two_workers(tmp_path: Path, counted_in: str) -> None:
    with contextlib.ExitStack() as stack:
        extra = stack.enter_context(scratch_redis()).env if counted_in == "redis" else {}
        await _ten_a_minute_and_a_budget_across_two_workers(tmp_path, extra)


async def _ten_a_minute_and_a_budget_across_two_workers(tmp_path: Path, extra: dict[str, str]) -> None:
    data_dir = tmp_path / "data"
    limited = await make_key(None, data_dir, "one-model", models=(MODEL,))
    # One key per try of the rate burst (tests/support/rate_windows.py), made before the gateway starts.
    ten_a_minute = [await make_key(None, data_dir, f"ten-a-minute-{n}", rpm=10) for n in range(ATTEMPTS)]
    budget = await make_key(None, data_dir, "small-budget", credits_per_day=0.25)
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream.sim.responder = lambda record: scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("ok"),
            scripts.metering_event(CREDITS_PER_REPLY),
            delay=0.05,
        )
        with serve(tmp_path, upstream.env(), workers=2, **extra) as server:
            doors = ["claude", "chat", "responses"]
            # The model: refused on every door, before any upstream call.
            assert await statuses([server.base_url], doors, limited, 3, OTHER_MODEL) == [403, 403, 403]
            assert upstream.sim.requests == []
            # Ten a minute, whichever worker and door each request reaches.

            async def sixteen_at_once(attempt: int) -> list[int]:
                return await statuses([server.base_url], doors, ten_a_minute[attempt], 16)

            outcome = await in_one_minute(sixteen_at_once)
            assert sorted(outcome) == [200] * 10 + [429] * 6, outcome
            # The budget: 0.25 credits, 0.1 a reply. Sent one after another, the third reply
            # (0.2 < 0.25 spent) is the last admitted.
            budget_outcome = []
            for n in range(5):
                budget_outcome += await statuses([server.base_url], [doors[n % 3]], budget, 1)
                await asyncio.sleep(0.3)  # the spend is counted just after each reply
            assert budget_outcome == [200, 200, 200, 429, 429]
        assert "Traceback" not in "\n".join(server.lines)


async def test_budget_overshoot_is_bounded_by_the_requests_in_flight(tmp_path: Path) -> None:
    """Replies cost what they cost only once they end: requests admitted while the budget still had
    room may all finish over it. With at most 3 in flight at 0.1 each, a budget of 0.5 ends below
    0.5 + 3 × 0.1: the overshoot stays under 0.3 credits."""
    data_dir = tmp_path / "data"
    key = await make_key(None, data_dir, "racing", credits_per_day=0.5, max_concurrent=3)
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream.sim.responder = lambda record: scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("ok"),
            scripts.metering_event(CREDITS_PER_REPLY),
            delay=0.2,
        )
        with scratch_redis() as redis_place, serve(tmp_path, upstream.env(), workers=2, **redis_place.env) as server:
            admitted = 0
            budget_refused = False
            async with httpx2.AsyncClient(timeout=30) as http:

                async def sender() -> None:
                    nonlocal admitted, budget_refused
                    path, body, headers = request_for("claude", key)
                    while not budget_refused:
                        response = await http.post(server.base_url + path, json=body, headers=headers)
                        if response.status_code == 200:
                            admitted += 1
                        elif "credits a day" in response.text:
                            budget_refused = True
                        else:
                            assert response.status_code == 429 and "concurrent" in response.text
                            await asyncio.sleep(0.05)

                await asyncio.gather(*(sender() for _ in range(8)))
    spent = admitted * CREDITS_PER_REPLY
    assert spent >= 0.5  # the budget was reached
    assert spent - 0.5 < 3 * CREDITS_PER_REPLY + 1e-9, f"{admitted} replies admitted: overshoot {spent - 0.5:.2f}"


async def test_two_replicas_on_postgresql_share_limits_and_a_revocation(tmp_path: Path) -> None:
    with scratch_database_url("postgresql") as database_url, SimulatedUpstream.run_in_thread() as upstream:
        six_a_minute = [await make_key(database_url, tmp_path, f"replicated-{n}", rpm=6) for n in range(ATTEMPTS)]
        env = {**upstream.env(), "Q2API_DATABASE_URL": database_url, "Q2API_SECRET_KEY": TEST_SECRET_KEY}
        with contextlib.ExitStack() as stack:
            for n in range(2):
                (tmp_path / f"r{n}").mkdir()
            replicas = [stack.enter_context(serve(tmp_path / f"r{n}", env)) for n in range(2)]
            targets = [replica.base_url for replica in replicas]

            async def ten_at_once(attempt: int) -> list[int]:
                return await statuses(targets, ["claude", "chat"], six_a_minute[attempt], 10)

            outcome = await in_one_minute(ten_at_once)
            assert sorted(outcome) == [200] * 6 + [429] * 4, outcome
            other = await make_key(database_url, tmp_path, "revoked-soon")
            assert await statuses(targets, ["claude"], other, 2) == [200, 200]
            database = await open_tenant_database(database_url, tmp_path)
            try:
                await KeyStore(database).revoke("revoked-soon")
            finally:
                await database.close()
            revoked_at = time.monotonic()
            while (outcome := await statuses(targets, ["claude"], other, 2)) != [401, 401]:
                assert time.monotonic() - revoked_at < 5, outcome
                await asyncio.sleep(0.2)
