"""The per-account in-flight cap and the host rests hold across the fleet (issue 31, item 2): a burst of 40
through `q2api serve --workers 2` (SQLite, and Redis), and through two replicas of two workers each on
PostgreSQL (counted in the store, and in Redis), never has more than the cap at the simulated upstream for
the account, judged there; every request is served or gets its door's overloaded answer with
`retry-after`. The slots of a worker killed mid-request are free again within seconds; a host that
failed over for one process rests for the others."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from q2api.fleet.ledger import SLOT_LEASE_SECONDS
from q2api.testing import scripts
from q2api.testing.scripts import Reply
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread
from tests.support.databases import TEST_SECRET_KEY, scratch_database_url
from tests.support.gateway_harness import JSON_BODY, MODEL, capture_logs, open_gateway
from tests.support.metrics_scrape import Scrape
from tests.support.serve_process import CLIENT_KEY, serve
from tests.support.tenant_stores import scratch_redis

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

BURST = 40
CAP = 2
REPLY_SECONDS = 0.4
# What a request that found no free slot gets, per door (docs/errors.md): Claude's 529 overloaded_error,
# the OpenAI doors' 503.
OVERLOADED = {"claude": 529, "chat": 503}
CAPPED = {
    "Q2API_ACCOUNT_MAX_INFLIGHT": str(CAP),
    "Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS": "3",
    "Q2API_MODEL_DISCOVERY": "false",
}


def request_for(door: str) -> tuple[str, dict[str, Any]]:
    messages = [{"role": "user", "content": "hi"}]
    if door == "claude":
        return "/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": messages}
    return "/v1/chat/completions", {"model": MODEL, "messages": messages}


async def burst(targets: list[str]) -> list[tuple[str, httpx2.Response]]:
    """BURST requests at once, spread over `targets` (base URLs) and the Claude and chat doors."""
    headers = {**JSON_BODY, "x-api-key": CLIENT_KEY, "authorization": f"Bearer {CLIENT_KEY}"}
    async with httpx2.AsyncClient(timeout=60) as http:

        async def one(n: int) -> tuple[str, httpx2.Response]:
            door = ("claude", "chat")[n % 2]
            path, body = request_for(door)
            return door, await http.post(targets[n % len(targets)] + path, json=body, headers=headers)

        return list(await asyncio.gather(*(one(n) for n in range(BURST))))


def judge_burst(upstream: SimulationThread, outcome: list[tuple[str, httpx2.Response]]) -> None:
    peaks = dict(upstream.sim.peak_in_flight_by_account)
    # One account: at no moment more than the cap at the upstream, and the cap was reached (the burst
    # really overlapped, so a cap counted per worker would have shown more).
    assert list(peaks.values()) == [CAP], peaks
    served = 0
    for door, response in outcome:
        if response.status_code == 200:
            served += 1
            continue
        assert response.status_code == OVERLOADED[door], (door, response.status_code, response.text)
        assert int(response.headers["retry-after"]) > 0
        if door == "claude":
            assert response.json()["error"]["type"] == "overloaded_error"
    assert served >= CAP
    assert len(upstream.sim.requests) == served  # the refused ones never reached Amazon Q


def slow_replies(upstream: SimulationThread) -> None:
    upstream.sim.responder = lambda record: scripts.stalled_reply(REPLY_SECONDS, text_before="ok")


@pytest.mark.parametrize("counted_in", ["store", "redis"])
async def test_a_burst_across_two_workers_never_has_more_than_the_cap_at_the_upstream(
    tmp_path: Path, counted_in: str
) -> None:
    with contextlib.ExitStack() as stack:
        extra = stack.enter_context(scratch_redis()).env if counted_in == "redis" else {}
        upstream = stack.enter_context(SimulatedUpstream.run_in_thread())
        slow_replies(upstream)
        server = stack.enter_context(serve(tmp_path, upstream.env(), workers=2, **CAPPED, **extra))
        judge_burst(upstream, await burst([server.base_url]))
        assert "Traceback" not in "\n".join(server.lines)


@pytest.mark.parametrize("counted_in", ["store", "redis"])
async def test_a_burst_across_two_replicas_of_two_workers_on_postgresql_never_has_more_than_the_cap(
    tmp_path: Path, counted_in: str
) -> None:
    with contextlib.ExitStack() as stack:
        extra = stack.enter_context(scratch_redis()).env if counted_in == "redis" else {}
        database_url = stack.enter_context(scratch_database_url("postgresql"))
        upstream = stack.enter_context(SimulatedUpstream.run_in_thread())
        slow_replies(upstream)
        env = {**upstream.env(), "Q2API_DATABASE_URL": database_url, "Q2API_SECRET_KEY": TEST_SECRET_KEY}
        replicas = []
        for n in range(2):
            (tmp_path / f"r{n}").mkdir()
            replicas.append(stack.enter_context(serve(tmp_path / f"r{n}", env, workers=2, **CAPPED, **extra)))
        judge_burst(upstream, await burst([replica.base_url for replica in replicas]))


@pytest.mark.parametrize("counted_in", ["store", "redis"])
async def test_the_slots_of_a_killed_process_are_free_again_within_seconds(tmp_path: Path, counted_in: str) -> None:
    """Two gateways on one SQLite store, counting in it or in Redis: the first takes both slots with
    replies that never end, and is killed (SIGKILL: nothing of it gives them back). The second is refused meanwhile — the slots are held
    fleet-wide, past their lease while renewed — and serves again once their short lease runs out
    unrenewed, not after minutes."""
    calls = itertools.count()

    def first_two_hang(record: Any) -> Reply:
        return scripts.stalled_reply(300 if next(calls) < CAP else 0.05, text_before="ok")

    settings = {**CAPPED, "Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS": "0"}
    headers = {**JSON_BODY, "x-api-key": CLIENT_KEY}
    path, body = request_for("claude")
    with contextlib.ExitStack() as stack:
        if counted_in == "redis":
            settings.update(stack.enter_context(scratch_redis()).env)
        upstream = stack.enter_context(SimulatedUpstream.run_in_thread())
        upstream.sim.responder = first_two_hang
        with (
            serve(tmp_path, upstream.env(), **settings) as doomed,
            serve(tmp_path, upstream.env(), **settings) as other,
        ):
            async with httpx2.AsyncClient(timeout=60) as http:
                hanging = [
                    asyncio.create_task(http.post(doomed.base_url + path, json=body, headers=headers))
                    for _ in range(CAP)
                ]
                deadline = time.monotonic() + 20
                while upstream.sim.in_flight_by_account.total() < CAP:
                    assert time.monotonic() < deadline, "the hanging replies never started"
                    await asyncio.sleep(0.05)
                refused = await http.post(other.base_url + path, json=body, headers=headers)
                assert refused.status_code == 529, refused.text
                # Past a lease, the slots still hold: their process renews them while their replies run.
                await asyncio.sleep(SLOT_LEASE_SECONDS + 1)
                refused = await http.post(other.base_url + path, json=body, headers=headers)
                assert refused.status_code == 529, refused.text
                doomed.kill()
                killed_at = time.monotonic()
                while (
                    response := await http.post(other.base_url + path, json=body, headers=headers)
                ).status_code != 200:
                    assert response.status_code == 529, response.text
                    # The lease, a renewal round and the wait of the last try: seconds, not a key lease's minute.
                    assert time.monotonic() - killed_at < SLOT_LEASE_SECONDS + 6
                    await asyncio.sleep(0.25)
                for task in hanging:
                    task.cancel()
                await asyncio.gather(*hanging, return_exceptions=True)


@pytest.mark.parametrize("counted_in", ["store", "redis"])
async def test_a_host_that_failed_over_for_one_process_rests_for_the_other(tmp_path: Path, counted_in: str) -> None:
    """Two gateways on one SQLite store (counting in it, or in Redis), the account's hosts a first one that
    refuses its (IdC) token and a second that serves it: the first gateway fails over once, and the second
    never tries the first host."""
    headers = {**JSON_BODY, "x-api-key": CLIENT_KEY}
    path, body = request_for("claude")
    settings = dict(CAPPED)
    with contextlib.ExitStack() as stack:
        if counted_in == "redis":
            settings.update(stack.enter_context(scratch_redis()).env)
        upstream = stack.enter_context(SimulatedUpstream.run_in_thread())
        refusing = upstream.run(upstream.sim.add_host(HostRules(refuses_token_kinds=frozenset({"idc"}))))
        serving = upstream.run(upstream.sim.add_host(HostRules()))
        env = {**upstream.env(), "AMAZONQ_ENDPOINT": f"{refusing.url},{serving.url}"}
        with serve(tmp_path, env, **settings) as first, serve(tmp_path, env, **settings) as second:
            async with httpx2.AsyncClient(timeout=60) as http:
                assert (await http.post(first.base_url + path, json=body, headers=headers)).status_code == 200
                refused_once = refusing.refused  # the token's refusals (a refresh may have been tried on it)
                assert refused_once >= 1 and serving.served == 1
                await asyncio.sleep(0.5)  # the rest is told to the fleet without the reply waiting for it
                for _ in range(3):
                    assert (await http.post(second.base_url + path, json=body, headers=headers)).status_code == 200
            assert (refusing.refused, serving.served) == (refused_once, 4)
            assert not any("upstream host failed over" in line for line in second.lines)
            assert sum("upstream host failed over" in line for line in first.lines) == 1


async def test_with_redis_down_each_worker_holds_the_cap_alone_and_says_so_once(tmp_path: Path) -> None:
    """Redis on a port nothing listens on: the burst is still served, the cap held by the process's own
    count (at the upstream, never more than the cap), and the log says it once, not once a request."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
    with capture_logs() as logs:
        async with open_gateway(
            tmp_path,
            Q2API_REDIS_URL=dead,
            Q2API_ACCOUNT_MAX_INFLIGHT=str(CAP),
            Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS="30",
        ) as gw:
            gw.sim.responder = lambda record: scripts.stalled_reply(0.1, text_before="ok")
            async with gw.http(timeout=60) as http:
                path, body = request_for("claude")
                before = Scrape((await http.get("/metrics")).text).value("q2api_account_slots_unshared_total")
                responses = await asyncio.gather(*(http.post(path, json=body) for _ in range(10)))
                after = Scrape((await http.get("/metrics")).text).value("q2api_account_slots_unshared_total")
    assert [response.status_code for response in responses] == [200] * 10
    assert list(gw.sim.peak_in_flight_by_account.values()) == [CAP]
    warnings = [line.message for line in logs.lines if "shared in-flight slots" in line.message]
    assert len(warnings) == 1 and "per worker" in warnings[0], warnings
    assert after - before == 10  # every call's slot, counted in the process alone
