"""Answers that retrying cannot fix say so, and every refusal names what the client should change.

Both official SDKs, and Claude Code on top of its own retries of a 401, read `x-should-retry: false`
before anything else: without it a client may retry for minutes in silence (Claude Code printed
nothing for 120 s against a gateway with no account). Here the real gateway answers each such case
on loopback, with the simulated Amazon Q behind it, and the official SDKs are the clients.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import (
    CLIENT_KEY,
    JSON_BODY,
    MODEL,
    Gateway,
    capture_logs,
    gateway_settings,
    open_gateway,
    running_gateway,
)

pytestmark = pytest.mark.asyncio

CLAUDE_BODY = {"model": MODEL, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
NO_ENV_ACCOUNT = {"AMAZONQ_REFRESH_TOKEN": "", "AMAZONQ_CLIENT_ID": "", "AMAZONQ_CLIENT_SECRET": ""}


async def make_key(data_dir: Path, label: str) -> str:
    """A client key kept in the store of `data_dir` (what `q2api keys create` makes)."""
    database = await open_tenant_database(None, data_dir)
    try:
        key, _record = await KeyStore(database).create(label, KeyLimits())
    finally:
        await database.close()
    return key


async def post(base_url: str, path: str, body: Any, **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient(base_url=base_url, timeout=20) as http:
        return await http.post(path, json=body, headers={**JSON_BODY, **headers})


async def test_no_account_configured_is_a_401_the_sdk_does_not_retry(tmp_path: Path):
    async with SimulatedUpstream() as sim:
        async with running_gateway(gateway_settings(sim, tmp_path, **NO_ENV_ACCOUNT)) as base_url:
            # Retries on, as Claude Code and the SDKs run by default: the answer must stop them.
            client = anthropic.AsyncAnthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=5, timeout=20)
            with capture_logs() as logs:
                async with client:
                    with pytest.raises(anthropic.AuthenticationError) as refused:
                        await client.messages.create(**CLAUDE_BODY)
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert "No Amazon Q account is configured" in refused.value.message
    assert len(logs.request_lines()) == 1  # asked once, not six times


@pytest.mark.parametrize(
    ("name", "reply", "status"),
    [
        ("access token refused after a refresh", [scripts.bearer_invalid(), scripts.bearer_invalid()], 401),
        ("account suspended", [scripts.access_denied()], 403),
        ("request refused as malformed", [scripts.improperly_formed()], 400),
        ("prompt over the context window", [scripts.context_overflow()], 400),
        ("monthly quota used up", [scripts.monthly_quota()], 429),
    ],
)
async def test_upstream_failures_retrying_cannot_fix_say_so(tmp_path: Path, name: str, reply: list, status: int):
    async with open_gateway(tmp_path) as gw:
        gw.sim.enqueue(*reply)
        response = await post(gw.base_url, "/v1/messages", CLAUDE_BODY, **{"x-api-key": CLIENT_KEY})
    assert response.status_code == status, name
    assert response.headers["x-should-retry"] == "false", name


async def test_upstream_failures_that_may_pass_leave_retrying_to_the_client(tmp_path: Path):
    async with open_gateway(tmp_path, Q2API_MAX_RETRIES="0") as gw:  # the client sees the first answer
        gw.sim.enqueue(scripts.throttled(retry_after=3), scripts.model_overloaded())
        throttled = await post(gw.base_url, "/v1/messages", CLAUDE_BODY, **{"x-api-key": CLIENT_KEY})
        overloaded = await post(gw.base_url, "/v1/messages", CLAUDE_BODY, **{"x-api-key": CLIENT_KEY})
    assert throttled.status_code == 429 and throttled.headers["retry-after"] == "3"
    assert overloaded.status_code == 529
    assert "x-should-retry" not in throttled.headers and "x-should-retry" not in overloaded.headers


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/messages", {"model": MODEL, "max_tokens": "many", "messages": []}, 400),
        ("POST", "/v1/chat/completions", {"model": MODEL, "messages": "hi"}, 400),
        ("POST", "/v1/responses", {"model": MODEL, "input": 7}, 400),
        ("GET", "/v1/responses/resp_missing", None, 404),
        ("GET", "/v1/nothing-here", None, 404),
        ("GET", "/v1/messages", None, 405),
    ],
)
async def test_refusals_of_the_gateway_itself_say_not_to_retry(gw: Gateway, method: str, path: str, body, status):
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
        response = await http.request(method, path, json=body, headers={"x-api-key": CLIENT_KEY})
    assert response.status_code == status
    assert response.headers["x-should-retry"] == "false"


async def test_a_bad_key_is_named_as_the_client_sent_it(gw: Gateway):
    claude = await post(gw.base_url, "/v1/messages", CLAUDE_BODY, **{"x-api-key": "wrong"})
    assert claude.json()["error"]["message"] == "invalid x-api-key"
    async with openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key="wrong", max_retries=0) as client:
        for call in (
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}]),
            client.responses.create(model=MODEL, input="hi"),
        ):
            with pytest.raises(openai.AuthenticationError) as refused:
                await call
            assert refused.value.body["message"] == "invalid Authorization: Bearer key"
            assert refused.value.response.headers["x-should-retry"] == "false"
    missing = await post(gw.base_url, "/v1/messages", CLAUDE_BODY)
    assert missing.json()["error"]["message"] == "x-api-key header or Authorization: Bearer is required"


async def test_a_base_url_ending_in_v1_gets_a_404_saying_what_to_fix(gw: Gateway):
    async with anthropic.AsyncAnthropic(base_url=f"{gw.base_url}/v1", api_key=CLIENT_KEY, max_retries=0) as claude:
        with pytest.raises(anthropic.NotFoundError) as refused:
            await claude.messages.create(**CLAUDE_BODY)
    assert refused.value.body["type"] == "error"  # the Claude door's envelope
    message = refused.value.message
    assert "POST /v1/v1/messages" in message and "/v1/messages is the endpoint" in message
    assert "ANTHROPIC_BASE_URL=http://HOST:PORT" in message

    async with openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1/v1", api_key=CLIENT_KEY, max_retries=0) as client:
        for call, endpoint in (
            (client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}]), "chat"),
            (client.responses.create(model=MODEL, input="hi"), "responses"),
        ):
            with pytest.raises(openai.NotFoundError) as refused_openai:
                await call
            body = refused_openai.value.body
            assert set(body) == {"message", "type", "param", "code"}  # the OpenAI doors' envelope
            assert "OPENAI_BASE_URL=http://HOST:PORT/v1" in body["message"], endpoint
            assert refused_openai.value.response.headers["x-should-retry"] == "false"
    # A path that is not a route even with one /v1 gets the plain 404.
    plain = await post(gw.base_url, "/v1/v1/nothing", {})
    assert plain.json()["error"]["message"] == "no such endpoint: POST /v1/v1/nothing"
    assert gw.sim.requests == []


async def test_a_key_store_that_cannot_be_read_is_a_503_each_door_names_as_documented(tmp_path: Path):
    async with open_gateway(tmp_path) as gw:
        store_key = await make_key(tmp_path, "ci")
        with sqlite3.connect(tmp_path / "q2api.sqlite3") as db:
            db.execute("DROP TABLE q2api_client_keys")  # every later look-up of a store key fails
        claude = await post(gw.base_url, "/v1/messages", CLAUDE_BODY, **{"x-api-key": store_key})
        async with httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
            stored = await http.get("/v1/responses/resp_1", headers={"authorization": f"Bearer {store_key}"})
    assert claude.status_code == 503 and claude.headers["retry-after"] == "2"
    assert claude.json()["error"]["type"] == "overloaded_error"
    assert stored.status_code == 503 and stored.headers["retry-after"] == "2"
    assert stored.json()["error"]["code"] == "store_unavailable"  # docs/errors.md
    assert "x-should-retry" not in claude.headers  # it may pass in a moment


async def test_the_start_up_warning_says_whether_keyless_requests_are_answered(tmp_path: Path):
    async def start_up_warnings(data_dir: Path) -> list[str]:
        async with SimulatedUpstream() as sim:
            with capture_logs() as logs:
                async with running_gateway(gateway_settings(sim, data_dir, Q2API_API_KEYS="")):
                    pass
        return [line.message for line in logs.lines if "Q2API_API_KEYS" in line.message]

    open_dir, keyed_dir = tmp_path / "open", tmp_path / "keyed"
    open_dir.mkdir()
    keyed_dir.mkdir()
    [open_warning] = await start_up_warnings(open_dir)
    assert "accepts requests without a client key" in open_warning
    await make_key(keyed_dir, "ci")
    [keyed_warning] = await start_up_warnings(keyed_dir)
    assert "accepts requests without" not in keyed_warning
    assert "requests need one of the client keys kept in the store" in keyed_warning
