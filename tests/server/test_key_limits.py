"""Store keys held to their models, rates, concurrency and budgets on every front door, before any
upstream call, each refusal in its door's envelope (the gateway on loopback, the simulated Amazon Q)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa

from q2api.tenants.counters import StoreCounters
from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.tenants.tables import key_leases
from q2api.tenants.windows import CREDITS_DAY, TOKENS, budget_windows, minute
from q2api.testing import scripts
from tests.support.gateway_harness import (
    CLIENT_KEY,
    JSON_BODY,
    MODEL,
    Gateway,
    capture_logs,
    eventually,
    find_secrets,
    open_gateway,
)
from tests.support.rate_windows import in_one_minute

pytestmark = pytest.mark.asyncio

OTHER_MODEL = "claude-haiku-4-5"
DOORS = ("claude", "chat", "responses")


def door_call(door: str, model: str = MODEL, *, stream: bool = False) -> tuple[str, dict[str, Any]]:
    if door == "claude":
        body = {"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
        return "/v1/messages", {**body, "stream": stream}
    if door == "chat":
        return "/v1/chat/completions", {
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }
    return "/v1/responses", {"model": model, "input": "hi", "stream": stream, "store": False}


def headers_for(door: str, key: str) -> dict[str, str]:
    auth = {"x-api-key": key} if door == "claude" else {"authorization": f"Bearer {key}"}
    return {**JSON_BODY, **auth}


async def call(gw: Gateway, door: str, key: str, model: str = MODEL) -> httpx2.Response:
    path, body = door_call(door, model)
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
        return await http.post(path, json=body, headers=headers_for(door, key))


def error_message(door: str, response: httpx2.Response) -> str:
    body = response.json()
    if door == "claude":
        assert body["type"] == "error"
        return body["error"]["message"]
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]["message"]


async def make_key(data_dir: Path, label: str, **limits: Any) -> str:
    database = await open_tenant_database(None, data_dir)
    try:
        key, _record = await KeyStore(database).create(label, KeyLimits(**limits))
    finally:
        await database.close()
    return key


async def revoke(data_dir: Path, label: str) -> None:
    database = await open_tenant_database(None, data_dir)
    try:
        await KeyStore(database).revoke(label)
    finally:
        await database.close()


def metered(credits: float, *hold: scripts.Hold) -> scripts.StreamReply:
    """A reply that costs `credits`; held after its first event until the test releases `hold`, if given."""
    return scripts.stream(
        scripts.conversation_event(),
        *hold,
        scripts.text_events("ok"),
        scripts.usage_event(10, 5),
        scripts.metering_event(credits),
    )


async def counted(data_dir: Path, label: str, window: str, amount: float) -> None:
    """Wait until the key's current `window` holds `amount`: the gateway counts a reply's use just after
    answering, off the request's path."""
    database = await open_tenant_database(None, data_dir)
    try:
        record = await KeyStore(database).find(label)
        counters = StoreCounters(database)
        deadline = time.monotonic() + 10
        while True:
            now = time.time()
            refs = [(window, *minute(now))] if window == TOKENS else budget_windows(now)
            used = (await counters.used(record.id, refs)).get(window, 0.0)
            if used >= amount - 1e-9:
                return
            assert time.monotonic() < deadline, f"{label!r} {window}: {used} counted, {amount} expected"
            await asyncio.sleep(0.02)
    finally:
        await database.close()


async def in_flight(data_dir: Path, label: str) -> int:
    """The key's requests in flight, as the store counts them."""
    database = await open_tenant_database(None, data_dir)
    try:
        record = await KeyStore(database).find(label)
        count = sa.select(sa.func.count()).select_from(key_leases).where(key_leases.c.key_id == record.id)
        return int(await database.read(lambda db: db.execute(count).scalar_one()))
    finally:
        await database.close()


@pytest.mark.parametrize("door", DOORS)
async def test_a_model_outside_the_keys_list_is_refused_naming_its_models(tmp_path: Path, door: str) -> None:
    async with open_gateway(tmp_path) as gw:
        key = await make_key(tmp_path, "one-model", models=(MODEL,))
        response = await call(gw, door, key, OTHER_MODEL)
        assert response.status_code == 403
        message = error_message(door, response)
        assert MODEL in message and OTHER_MODEL in message and "one-model" in message
        assert gw.sim.requests == []  # refused before any upstream call
        gw.sim.enqueue(scripts.text_reply("fine"))
        assert (await call(gw, door, key)).status_code == 200


@pytest.mark.parametrize("door", DOORS)
async def test_rpm_admits_exactly_the_limit_then_429_with_retry_after(tmp_path: Path, door: str) -> None:
    async with open_gateway(tmp_path) as gw:

        async def three_then_one_more(attempt: int) -> tuple[int, httpx2.Response]:
            key = await make_key(tmp_path, f"three-a-minute-{attempt}", rpm=3)
            for remaining in (2, 1, 0):
                gw.sim.enqueue(scripts.text_reply("ok"))
                response = await call(gw, door, key)
                assert response.status_code == 200
                assert response.headers["anthropic-ratelimit-requests-remaining"] == str(remaining)
                assert response.headers["anthropic-ratelimit-requests-limit"] == "3"
            return len(gw.sim.requests), await call(gw, door, key)

        calls, refused = await in_one_minute(three_then_one_more)
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert refused.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert "3 requests a minute" in error_message(door, refused)
        assert len(gw.sim.requests) == calls


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.slow  # waits out the gateway's two-second key cache
async def test_a_revoked_key_stops_within_seconds_and_an_expired_one_is_refused(tmp_path: Path, door: str) -> None:
    async with open_gateway(tmp_path) as gw:
        key = await make_key(tmp_path, "soon-revoked")
        gw.sim.enqueue(scripts.text_reply("ok"))
        assert (await call(gw, door, key)).status_code == 200
        await revoke(tmp_path, "soon-revoked")
        started = time.monotonic()
        while (response := await call(gw, door, key)).status_code != 401:
            gw.sim.enqueue(scripts.text_reply("ok"))
            assert time.monotonic() - started < 5, "the revoked key still works"
            await asyncio.sleep(0.2)
        assert "revoked" in error_message(door, response)
        old = await make_key(tmp_path, "expired", expires_at=time.time() - 1)
        response = await call(gw, door, old)
        assert response.status_code == 401 and "expired" in error_message(door, response)


@pytest.mark.parametrize("door", DOORS)
async def test_a_daily_budget_refuses_once_spent(tmp_path: Path, door: str) -> None:
    async with open_gateway(tmp_path) as gw:
        key = await make_key(tmp_path, "budget", credits_per_day=0.5)
        for spent in (0.3, 0.6):  # 0 spent, then 0.3: both under 0.5
            gw.sim.enqueue(metered(0.3))
            assert (await call(gw, door, key)).status_code == 200
            await counted(tmp_path, "budget", CREDITS_DAY, spent)
        refused = await call(gw, door, key)
        assert refused.status_code == 429
        assert "0.5 credits a day" in error_message(door, refused)
        assert int(refused.headers["retry-after"]) >= 1


@pytest.mark.parametrize("door", DOORS)
async def test_concurrency_refuses_the_request_over_the_limit(tmp_path: Path, door: str) -> None:
    async with open_gateway(tmp_path) as gw:
        key = await make_key(tmp_path, "one-at-a-time", max_concurrent=1)
        hold = scripts.Hold()
        gw.sim.enqueue(metered(0.0, hold))
        slow = asyncio.create_task(call(gw, door, key))
        assert await gw.sim.wait_until(lambda: len(gw.sim.requests) == 1)
        refused = await call(gw, door, key)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert "concurrent" in error_message(door, refused)
        hold.release()
        assert (await slow).status_code == 200
        deadline = time.monotonic() + 10
        while await in_flight(tmp_path, "one-at-a-time"):  # its place is given back just after the reply
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        gw.sim.enqueue(scripts.text_reply("ok"))
        assert (await call(gw, door, key)).status_code == 200


@pytest.mark.parametrize("door", DOORS)
async def test_tpm_counts_the_input_estimate_then_the_real_usage(tmp_path: Path, door: str) -> None:
    async with open_gateway(tmp_path) as gw:

        async def one_reply_then_one_more(attempt: int) -> httpx2.Response:
            key = await make_key(tmp_path, f"tokens-{attempt}", tpm=3000)
            gw.sim.enqueue(
                scripts.stream(scripts.conversation_event(), scripts.text_events("ok"), scripts.usage_event(100, 2900))
            )
            response = await call(gw, door, key)
            assert response.status_code == 200
            assert response.headers["anthropic-ratelimit-tokens-limit"] == "3000"
            await counted(tmp_path, f"tokens-{attempt}", TOKENS, 3000)
            return await call(gw, door, key)  # the reply's 2900 output tokens were counted

        refused = await in_one_minute(one_reply_then_one_more)
        assert refused.status_code == 429 and "tokens a minute" in error_message(door, refused)


@pytest.mark.slow  # waits out the gateway's two-second key cache
async def test_count_tokens_checks_the_keys_standing_and_models(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw, httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
        key = await make_key(tmp_path, "counter", models=(MODEL,), rpm=1)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(3):  # no rate: counting costs no upstream call
            assert (
                await http.post("/v1/messages/count_tokens", json=body, headers=headers_for("claude", key))
            ).status_code == 200
        other = await http.post(
            "/v1/messages/count_tokens", json={**body, "model": OTHER_MODEL}, headers=headers_for("claude", key)
        )
        assert other.status_code == 403 and MODEL in other.json()["error"]["message"]
        await revoke(tmp_path, "counter")
        await eventually(
            lambda: http.post("/v1/messages/count_tokens", json=body, headers=headers_for("claude", key)), 401
        )


async def test_the_label_is_logged_never_the_key_and_env_keys_stay_unlimited(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw:
        key = await make_key(tmp_path, "logged-bot", rpm=1)
        with capture_logs() as logs:
            gw.sim.enqueue(scripts.text_reply("ok"), scripts.text_reply("ok"), scripts.text_reply("ok"))
            assert (await call(gw, "claude", key)).status_code == 200
            assert (await call(gw, "claude", key)).status_code == 429
            for _ in range(2):  # the environment key has no limit
                assert await gw.client.messages.create(
                    model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}]
                )
        lines = logs.request_lines()
        assert [line.extra.get("key") for line in lines] == ["logged-bot", "logged-bot", None, None]
        assert key not in logs.text and key[4:] not in logs.text
        assert find_secrets(logs.text) == []


@pytest.mark.slow  # waits out the gateway's two-second key cache
async def test_an_open_gateway_closes_once_a_store_key_exists(tmp_path: Path) -> None:
    async with (
        open_gateway(tmp_path, Q2API_API_KEYS="") as gw,
        httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http,
    ):
        path, body = door_call("claude")
        gw.sim.enqueue(scripts.text_reply("ok"))
        assert (await http.post(path, json=body, headers=JSON_BODY)).status_code == 200
        key = await make_key(tmp_path, "first")
        await eventually(lambda: http.post(path, json=body, headers=JSON_BODY), 401)  # served until it knows
        gw.sim.enqueue(scripts.text_reply("ok"))
        assert (await http.post(path, json=body, headers=headers_for("claude", key))).status_code == 200


async def test_models_lists_only_the_keys_models(tmp_path: Path) -> None:
    async with open_gateway(tmp_path) as gw, httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
        everything = (await http.get("/v1/models", headers=headers_for("claude", CLIENT_KEY))).json()["data"]
        assert MODEL in [entry["id"] for entry in everything] and len(everything) > 1
        key = await make_key(tmp_path, "one-model", models=(MODEL,))
        listed = (await http.get("/v1/models", headers=headers_for("chat", key))).json()["data"]
        assert [entry["id"] for entry in listed] == [MODEL]


async def test_a_counter_store_that_is_down_lets_requests_through(tmp_path: Path) -> None:
    async with open_gateway(tmp_path, Q2API_REDIS_URL="redis://127.0.0.1:1/0") as gw:
        key = await make_key(tmp_path, "redis-down", rpm=1)
        with capture_logs() as logs:
            for _ in range(2):
                gw.sim.enqueue(scripts.text_reply("ok"))
                assert (await call(gw, "claude", key)).status_code == 200
        assert "the client keys' counters cannot be used" in logs.text and key not in logs.text


async def test_replies_cut_at_max_tokens_cost_an_estimate_above_zero_so_a_budget_stops_them(tmp_path: Path) -> None:
    """A reply cut at the client's max_tokens ends before Amazon Q's metering: its credits are estimated.
    Before any metered reply the estimate was 0, and a budgeted key with a small max_tokens was never
    stopped; it is at least what Amazon Q meters a reply to (0.01)."""
    long_reply = scripts.stream(
        scripts.conversation_event(),
        scripts.text_events("word " * 400, chunks=40),
        scripts.usage_event(10, 400),
        scripts.metering_event(0.4),  # never reached: the reply is cut long before
    )
    async with open_gateway(tmp_path) as gw:
        key = await make_key(tmp_path, "small-budget", credits_per_day=0.03)
        statuses = []
        async with httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
            for _ in range(8):
                gw.sim.enqueue(long_reply)
                body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
                response = await http.post("/v1/messages", json=body, headers=headers_for("claude", key))
                statuses.append(response.status_code)
                if response.status_code == 200:
                    assert response.json()["stop_reason"] == "max_tokens"
                await asyncio.sleep(0.2)  # the spend is counted just after the reply
        assert statuses[:3] == [200, 200, 200] and 429 in statuses, statuses
        assert statuses.index(429) <= 4  # 0.01 a reply at least: 0.03 spent after three
