"""A store key's places in flight on Redis that freezes (issue 30, item 5): a Redis frozen past the
admission's timeout lets requests through without a place, and when it runs again the admissions
queued meanwhile must not take places for requests that no longer wait for them (they took them for
30 minutes, and a key with `--max-concurrent 2` was refused every request). A place is held while
its request runs (renewed), not longer.

A Redis server of the test's own, stopped with SIGSTOP and let go with SIGCONT.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis

from q2api.tenants import counters as counters_module
from q2api.tenants import gate as gate_module
from q2api.tenants import redis_counters
from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing import scripts
from tests.support.gateway_harness import JSON_BODY, MODEL, Gateway, open_gateway
from tests.support.redis_process import redis_server
from tests.support.tenant_stores import scratch_redis

pytestmark = pytest.mark.asyncio


async def make_key(data_dir: Path, label: str, **limits: Any) -> tuple[str, str]:
    database = await open_tenant_database(None, data_dir)
    try:
        key, record = await KeyStore(database).create(label, KeyLimits(**limits))
    finally:
        await database.close()
    return key, record.id


async def ask(gw: Gateway, key: str) -> int:
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=30) as http:
        return (await http.post("/v1/messages", json=body, headers={**JSON_BODY, "x-api-key": key})).status_code


def places_taken(url: str, key_id: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.zcard(f"q2api:tenants:{{{key_id}}}:leases"))
    finally:
        client.close()


async def test_admissions_a_frozen_redis_runs_late_take_no_place(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        async with open_gateway(
            tmp_path, prepare=lambda sim: setattr(sim, "responder", lambda r: scripts.text_reply("ok")),
            Q2API_REDIS_URL=server.url,
        ) as gw:  # fmt: skip
            key, key_id = await make_key(tmp_path, "two-at-a-time", max_concurrent=2)
            assert await ask(gw, key) == 200  # Redis knows the admission script now
            server.freeze()
            try:
                # Each waits out the admission's timeout and is served without a place
                # (Q2API_LIMITS_WHEN_STORE_DOWN=admit).
                assert await asyncio.gather(*(ask(gw, key) for _ in range(4))) == [200] * 4
            finally:
                server.thaw()  # Redis now runs the four admissions sent while it was frozen
            await asyncio.sleep(0.5)
            assert places_taken(server.url, key_id) == 0
            assert [await ask(gw, key) for _ in range(4)] == [200] * 4  # not 429: no place left taken
            assert places_taken(server.url, key_id) == 0


@pytest.mark.parametrize("counted_in", ["store", "redis"])
async def test_a_request_longer_than_a_lease_keeps_its_place_while_it_runs(
    tmp_path: Path, counted_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(counters_module, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(redis_counters, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(gate_module, "LEASE_RENEW_SECONDS", 0.3)
    with contextlib.ExitStack() as places:
        extra = places.enter_context(scratch_redis()).env if counted_in == "redis" else {}
        await _held_while_it_runs(tmp_path, extra)


async def _held_while_it_runs(tmp_path: Path, extra: dict[str, str]) -> None:
    async with open_gateway(tmp_path, **extra) as gw:
        key, _key_id = await make_key(tmp_path, "one-at-a-time", max_concurrent=1)
        gw.sim.enqueue(scripts.stalled_reply(3.0, text_after="done"))
        long_one = asyncio.create_task(ask(gw, key))
        await asyncio.sleep(0.5)
        for _ in range(4):  # 0.5 s to 2.5 s into it, past LEASE_SECONDS: its place is still taken
            assert await ask(gw, key) == 429
            await asyncio.sleep(0.5)
        assert await long_one == 200
        gw.sim.enqueue(scripts.text_reply("next"))
        assert await ask(gw, key) == 200  # its place was given back at its end
