"""A web page the user visits cannot use the gateway through the browser (issue 26, item 3).

* A JSON endpoint takes only `Content-Type: application/json` (the content types a page may send
  cross-site without a preflight are refused with 415, in each door's envelope);
* a gateway without client keys answers only a loopback `Host` or one listed in
  Q2API_ALLOWED_HOSTS (DNS rebinding), 403 otherwise, in each door's envelope;
* no redirect is built from the `Host` header;
* the official SDKs, which send JSON, still work with and without client keys.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import orjson
import pytest

from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import (
    ADMIN_KEY,
    CLIENT_KEY,
    MODEL,
    Gateway,
    assert_error_envelope,
    gateway_settings,
    open_gateway,
)
from tests.support.openai_harness import assert_openai_envelope

HOSTILE_HOST = "rebound.attacker.example"
MESSAGES_BODY = {"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
CHAT_BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
# (path, body, envelope)
JSON_ENDPOINTS = [
    ("/v1/messages", MESSAGES_BODY, "anthropic"),
    ("/v1/messages/count_tokens", MESSAGES_BODY, "anthropic"),
    ("/v1/chat/completions", CHAT_BODY, "openai"),
]


def assert_door_envelope(response: httpx2.Response, envelope: str, error_type: str) -> str:
    if envelope == "anthropic":
        return assert_error_envelope(response.json(), error_type)
    error = assert_openai_envelope(response.json()["error"])
    assert error["type"] == error_type, error
    return error["message"]


@contextlib.asynccontextmanager
async def keyless_gateway(tmp_path: Path, **env: str) -> AsyncIterator[tuple[SimulatedUpstream, str]]:
    """A gateway without client keys (the default), on loopback; yields the simulator and the base URL."""
    async with SimulatedUpstream() as sim:
        settings = gateway_settings(sim, tmp_path, Q2API_API_KEYS="", **env)
        async with running_gateway(settings) as base_url:
            yield sim, base_url


# -- Content-Type ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None, "application/jsonl"],
    ids=["text", "form", "multipart", "none", "jsonl"],
)
@pytest.mark.parametrize(("path", "body", "envelope"), JSON_ENDPOINTS, ids=["messages", "count_tokens", "chat"])
async def test_a_json_endpoint_refuses_a_body_that_is_not_said_to_be_json(
    gw: Gateway, path: str, body: dict[str, Any], envelope: str, content_type: str | None
) -> None:
    headers = {"x-api-key": CLIENT_KEY} | ({"content-type": content_type} if content_type else {})
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=10) as http:
        response = await http.post(path, content=orjson.dumps(body), headers=headers)
    assert response.status_code == 415, response.text
    message = assert_door_envelope(response, envelope, "invalid_request_error")
    assert message.startswith("Content-Type must be application/json")
    assert response.headers["x-should-retry"] == "false"
    assert gw.sim.requests == []


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8"]
)
async def test_json_with_parameters_or_in_capitals_is_json(gw: Gateway, content_type: str) -> None:
    gw.sim.enqueue(scripts.text_reply("ok"))
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=10) as http:
        response = await http.post(
            "/v1/messages",
            content=orjson.dumps(MESSAGES_BODY),
            headers={"x-api-key": CLIENT_KEY, "content-type": content_type},
        )
    assert response.status_code == 200, response.text


async def test_the_admin_api_refuses_a_body_that_is_not_said_to_be_json(tmp_path) -> None:
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gw:
        async with httpx2.AsyncClient(
            base_url=gw.base_url, headers={"authorization": f"Bearer {ADMIN_KEY}", "content-type": "text/plain"}
        ) as http:
            answers = [
                await http.post("/admin/api/accounts", content=b'{"label": "x", "refresh_token": "y"}'),
                await http.patch("/admin/api/accounts/env", content=b'{"label": "renamed"}'),
                await http.post("/admin/api/logins", content=b'{"label": "x", "method": "idc"}'),
            ]
            accounts = (await http.get("/admin/api/accounts")).json()["accounts"]
    for response in answers:
        assert response.status_code == 415, response.text
        error = response.json()["error"]
        assert error["type"] == "unsupported_media_type" and error["message"].startswith("Content-Type must be")
    assert [account["label"] for account in accounts] == ["environment"]  # nothing added, nothing renamed


# -- Host ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "envelope"),
    [("POST", path, body, envelope) for path, body, envelope in JSON_ENDPOINTS]
    + [("GET", "/v1/models", None, "anthropic")],
    ids=["messages", "count_tokens", "chat", "models"],
)
async def test_without_client_keys_a_foreign_host_is_refused_in_the_doors_envelope(
    tmp_path, method: str, path: str, body: dict[str, Any] | None, envelope: str
) -> None:
    async with keyless_gateway(tmp_path) as (sim, base_url), httpx2.AsyncClient(base_url=base_url) as http:
        response = await http.request(
            method,
            path,
            content=orjson.dumps(body) if body else None,
            headers={"host": f"{HOSTILE_HOST}:8000", "content-type": "application/json"},
        )
    assert response.status_code == 403, response.text
    message = assert_door_envelope(response, envelope, "permission_error")
    assert f"'{HOSTILE_HOST}:8000'" in message and "Q2API_ALLOWED_HOSTS" in message
    assert response.headers["x-should-retry"] == "false"
    assert sim.requests == []


@pytest.mark.parametrize(
    "host",
    ["localhost:{port}", "LOCALHOST.:{port}", "127.0.0.1:{port}", "127.0.0.1", "[::1]:{port}", "localhost"],
)
async def test_without_client_keys_loopback_hosts_are_answered(tmp_path, host: str) -> None:
    async with keyless_gateway(tmp_path) as (sim, base_url), httpx2.AsyncClient(base_url=base_url) as http:
        sim.enqueue(scripts.text_reply("ok"))
        port = base_url.rsplit(":", 1)[1]
        response = await http.post(
            "/v1/messages",
            json=MESSAGES_BODY,
            headers={"host": host.format(port=port)},
        )
    assert response.status_code == 200, response.text


async def test_listed_hosts_are_answered_and_others_still_refused(tmp_path) -> None:
    allowed = "gateway.lan, [fd00::5], *.corp.example"
    async with keyless_gateway(tmp_path, Q2API_ALLOWED_HOSTS=allowed) as (sim, base_url):
        sim.enqueue(*[scripts.text_reply("ok") for _ in range(3)])
        async with httpx2.AsyncClient(base_url=base_url) as http:
            hosts = [
                "gateway.lan:8000",
                "[fd00::5]:8000",
                "q2api.corp.example",
                HOSTILE_HOST,
                "gateway.lan.attacker.example",
                "corp.example",
                "corp.example.attacker.example",
            ]
            statuses = [
                (await http.post("/v1/messages", json=MESSAGES_BODY, headers={"host": host})).status_code
                for host in hosts
            ]
    assert statuses == [200, 200, 200, 403, 403, 403, 403]


async def test_a_star_answers_any_host(tmp_path) -> None:
    async with keyless_gateway(tmp_path, Q2API_ALLOWED_HOSTS="*") as (sim, base_url):
        sim.enqueue(scripts.text_reply("ok"))
        async with httpx2.AsyncClient(base_url=base_url) as http:
            response = await http.post("/v1/messages", json=MESSAGES_BODY, headers={"host": HOSTILE_HOST})
    assert response.status_code == 200, response.text


async def test_with_client_keys_the_key_is_what_counts_not_the_host(gw: Gateway) -> None:
    gw.sim.enqueue(scripts.text_reply("ok"))
    async with gw.http() as http:
        response = await http.post("/v1/messages", json=MESSAGES_BODY, headers={"host": HOSTILE_HOST})
    assert response.status_code == 200, response.text


async def test_monitors_are_answered_whatever_the_host(tmp_path) -> None:
    # Probes (a kubelet, a load balancer) name the pod or the node, and these answers hold no secret.
    async with keyless_gateway(tmp_path) as (_sim, base_url), httpx2.AsyncClient(base_url=base_url) as http:
        statuses = [
            (await http.get(path, headers={"host": "10.1.2.3:8000"})).status_code for path in ("/healthz", "/metrics")
        ]
    assert statuses == [200, 200]


# -- redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "meant", "envelope"),
    [
        ("POST", "/v1/messages/", "/v1/messages", "anthropic"),
        ("GET", "/v1/models/", "/v1/models", "anthropic"),
        ("POST", "/v1/chat/completions/", "/v1/chat/completions", "openai"),
    ],
)
async def test_a_trailing_slash_is_a_404_naming_the_path_never_a_redirect_to_the_host(
    gw: Gateway, method: str, path: str, meant: str, envelope: str
) -> None:
    async with gw.http() as http:
        response = await http.request(method, path, content=b"{}", headers={"host": HOSTILE_HOST})
    assert response.status_code == 404, response.text
    assert "location" not in response.headers
    message = assert_door_envelope(
        response, envelope, "not_found_error" if envelope == "anthropic" else "invalid_request_error"
    )
    assert message.endswith(f"(no trailing slash: {meant})")
    assert HOSTILE_HOST not in response.text


# -- the real clients ------------------------------------------------------------------------------


async def test_the_official_sdks_work_without_client_keys(tmp_path) -> None:
    async with keyless_gateway(tmp_path) as (sim, base_url):
        sim.enqueue(scripts.text_reply("from anthropic"), scripts.text_reply("from openai"))
        async with anthropic.AsyncAnthropic(base_url=base_url, api_key="unused", max_retries=0) as claude:
            message = await claude.messages.create(**MESSAGES_BODY)
        async with openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as gpt:
            completion = await gpt.chat.completions.create(**CHAT_BODY)
            models = await gpt.models.list()
    assert message.content[0].text == "from anthropic"
    assert completion.choices[0].message.content == "from openai"
    assert models.data


async def test_a_wrong_client_key_is_not_retried_by_either_sdk(gw: Gateway) -> None:
    sent: list[str] = []

    async def count(request: httpx2.Request) -> None:
        sent.append(request.url.path)

    def counted_http() -> httpx2.AsyncClient:
        return httpx2.AsyncClient(event_hooks={"request": [count]})

    # Both SDKs with their default retries (two); Claude Code retries a 401 unless told not to.
    claude = anthropic.AsyncAnthropic(base_url=gw.base_url, api_key="wrong", http_client=counted_http())
    gpt = openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key="wrong", http_client=counted_http())
    async with claude, gpt:
        with pytest.raises(anthropic.AuthenticationError) as claude_refused:
            await claude.messages.create(**MESSAGES_BODY)
        with pytest.raises(openai.AuthenticationError) as gpt_refused:
            await gpt.chat.completions.create(**CHAT_BODY)
    assert sent == ["/v1/messages", "/v1/chat/completions"]
    assert claude_refused.value.response.headers["x-should-retry"] == "false"
    assert gpt_refused.value.response.headers["x-should-retry"] == "false"
