"""No key is served unchecked (issue 30, item 2): a store key's models, expiry and revocation hold on every
door whatever is down; only its counters may be skipped, as Q2API_LIMITS_WHEN_STORE_DOWN says, with one
WARNING a minute and a /metrics counter; a request whose key cannot be read at all is a 503 with
`retry-after` in its door's envelope, never served.

Redis down (a port nothing listens on) leaves the SQLite store readable: the counters alone fail. A
shared database cut behind a proxy fails both; for two seconds the key a worker looked up stays
trusted (its record, with its models), then the key cannot be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from q2api.server.lifecycle.tenancy import KEY_CACHE_SECONDS
from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing import scripts
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, scratch_database_url
from tests.support.fault_proxy import fault_proxy
from tests.support.gateway_harness import JSON_BODY, MODEL, Gateway, capture_logs, open_gateway
from tests.support.metrics_scrape import Scrape

pytestmark = pytest.mark.asyncio

OTHER_MODEL = "claude-haiku-4-5"
DOORS = ("claude", "chat", "responses")
COUNTERS_WARNING = "the client keys' counters cannot be used"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request_for(door: str, key: str, model: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    if door == "claude":
        body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        return "/v1/messages", body, {**JSON_BODY, "x-api-key": key}
    bearer = {**JSON_BODY, "authorization": f"Bearer {key}"}
    if door == "chat":
        return "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "hi"}]}, bearer
    return "/v1/responses", {"model": model, "input": "hi", "store": False}, bearer


async def call(gw: Gateway, door: str, key: str, model: str = MODEL) -> httpx2.Response:
    path, body, headers = request_for(door, key, model)
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=30) as http:
        return await http.post(path, json=body, headers=headers)


def door_error(door: str, response: httpx2.Response) -> str:
    """The message of `response`'s error, checked to be in `door`'s envelope."""
    body = response.json()
    if door == "claude":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return str(body["error"]["message"])


def store_unavailable_kind(door: str, response: httpx2.Response) -> bool:
    """A store that cannot be read, as each door says it (docs/errors.md)."""
    error = response.json()["error"]
    return error["type"] == "overloaded_error" if door == "claude" else error["code"] == "store_unavailable"


async def make_key(database_url: str | None, data_dir: Path, label: str, **limits: Any) -> str:
    database = await open_tenant_database(database_url, data_dir)
    try:
        key, _record = await KeyStore(database).create(label, KeyLimits(**limits))
    finally:
        await database.close()
    return key


async def scrape(gw: Gateway) -> Scrape:
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=10) as http:
        return Scrape((await http.get("/metrics")).text)


def replying(sim: Any) -> None:
    sim.responder = lambda record: scripts.text_reply("served")


@pytest.mark.parametrize("when_down", ["admit", "refuse"])
async def test_with_redis_down_a_one_model_key_is_refused_every_other_model_on_every_door(
    tmp_path: Path, when_down: str
) -> None:
    redis_down = f"redis://127.0.0.1:{closed_port()}/0"
    with capture_logs() as logs:
        async with open_gateway(
            tmp_path, prepare=replying, Q2API_REDIS_URL=redis_down, Q2API_LIMITS_WHEN_STORE_DOWN=when_down
        ) as gw:
            key = await make_key(None, tmp_path, "one-model", models=(MODEL,), rpm=5, max_concurrent=1)
            before = await scrape(gw)
            for _round in range(3):
                for door in DOORS:
                    refused = await call(gw, door, key, OTHER_MODEL)
                    assert refused.status_code == 403, refused.text
                    assert MODEL in door_error(door, refused) and OTHER_MODEL in door_error(door, refused)
                    own = await call(gw, door, key)
                    if when_down == "admit":  # served without its counters: rpm=5 is not held meanwhile
                        assert own.status_code == 200, own.text
                    else:
                        assert own.status_code == 503, own.text
                        assert own.headers["retry-after"] == "2"
                        assert "one-model" in door_error(door, own)
                        assert store_unavailable_kind(door, own)
            after = await scrape(gw)
            served = len(gw.sim.requests)
    assert served == (9 if when_down == "admit" else 0)  # never another model, whatever the counters
    decision = "admitted" if when_down == "admit" else "refused"
    unchecked = "q2api_key_limits_unchecked_total"
    assert (
        after.value(unchecked, key="one-model", decision=decision)
        - before.value(unchecked, key="one-model", decision=decision)
        == 9
    )
    warnings = [line.message for line in logs.lines if line.level == "WARNING"]
    assert sum(COUNTERS_WARNING in message for message in warnings) == 1, warnings  # not one per request
    assert f"Q2API_LIMITS_WHEN_STORE_DOWN={when_down}" in next(m for m in warnings if COUNTERS_WARNING in m)


@contextlib.asynccontextmanager
async def gateway_behind_a_proxy(kind: str, tmp_path: Path) -> AsyncIterator[tuple[Gateway, Any, str]]:
    with scratch_database_url(kind) as database_url:
        async with fault_proxy(database_url) as proxy:
            proxied = proxy.url_through(database_url)
            async with open_gateway(
                tmp_path, prepare=replying, Q2API_DATABASE_URL=proxied, Q2API_SECRET_KEY=TEST_SECRET_KEY
            ) as gw:
                yield gw, proxy, database_url


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_with_the_shared_store_down_a_key_is_held_to_its_models_then_refused_503(
    kind: str, tmp_path: Path
) -> None:
    async with gateway_behind_a_proxy(kind, tmp_path) as (gw, proxy, database_url):
        key = await make_key(database_url, tmp_path, "one-model", models=(MODEL,), rpm=100)
        for door in DOORS:  # each door looks the key up once: the record is now trusted for two seconds
            assert (await call(gw, door, key)).status_code == 200
        await proxy.cut()
        for door in DOORS:  # the record (its models) holds; its counters are down: admitted unchecked
            refused = await call(gw, door, key, OTHER_MODEL)
            assert refused.status_code == 403, refused.text
        served = len(gw.sim.requests)
        await asyncio.sleep(KEY_CACHE_SECONDS + 0.2)  # the looked-up record is no longer trusted
        for door in DOORS:
            for model in (MODEL, OTHER_MODEL):
                down = await call(gw, door, key, model)
                assert down.status_code == 503, down.text
                assert down.headers["retry-after"] == "2"
                assert "key store is unavailable" in door_error(door, down)
                assert store_unavailable_kind(door, down)
        assert len(gw.sim.requests) == served  # nothing served while the key could not be read
        await proxy.restore()
        for door in DOORS:
            assert (await call(gw, door, key, OTHER_MODEL)).status_code == 403
