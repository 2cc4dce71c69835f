"""Failures on the OpenAI door reach the official `openai` SDK as the errors it classifies.

Every status the SDK maps (400, 401, 403, 404, 413, 429 with retry-after, 500, 503), the
prompt-too-long case as `context_length_exceeded`, bad requests naming the client's own field
(even when a later stage found the fault), a failure after streaming started as the error
chunk the SDK raises on, and a client that leaves closing the upstream request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from typing import Any

import httpx2
import openai
import pytest

from q2api.testing import scripts
from q2api.testing.scripts import Reply
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import (
    CLIENT_KEY,
    MODEL,
    Gateway,
    capture_logs,
    find_secrets,
    gateway,
    open_gateway,
)
from tests.support.openai_harness import assert_openai_envelope, openai_client

NO_GATEWAY_RETRIES = {"Q2API_MAX_RETRIES": "0"}
HI = [{"role": "user", "content": "hi"}]


@dataclasses.dataclass(frozen=True)
class Case:
    reply: Reply
    status: int
    exception: type[openai.APIStatusError]
    error_type: str
    code: str | None
    message: str
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


UPSTREAM_CASES = {
    "context_overflow": Case(
        scripts.context_overflow(),
        400,
        openai.BadRequestError,
        "invalid_request_error",
        "context_length_exceeded",
        # The size-shaped refusal names the size it refused (issue 31 item 4).
        r"^prompt is too long: \d+ tokens > \d+ maximum \(Amazon Q at [^()]+ refused the [\d,]+-byte request as too large\)$",
    ),
    "improperly_formed": Case(
        scripts.improperly_formed(), 400, openai.BadRequestError, "invalid_request_error", None, "Improperly formed"
    ),
    "suspended": Case(
        scripts.access_denied(), 403, openai.PermissionDeniedError, "permission_error", None, "suspended"
    ),
    "throttled": Case(
        scripts.throttled(retry_after=30),
        429,
        openai.RateLimitError,
        "rate_limit_error",
        "rate_limit_exceeded",
        "throttling",
        headers={"retry-after": "30"},
    ),
    "monthly_quota": Case(
        scripts.monthly_quota(),
        429,
        openai.RateLimitError,
        "insufficient_quota",
        "insufficient_quota",
        "monthly request limit",
        headers={"x-should-retry": "false"},
    ),
    "server_error": Case(
        scripts.server_error(500), 500, openai.InternalServerError, "server_error", "api_error", "Amazon Q failed"
    ),
    "overloaded": Case(
        scripts.model_overloaded(), 503, openai.InternalServerError, "server_error", "overloaded_error", "overloaded"
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("name", list(UPSTREAM_CASES))
async def test_upstream_failures_map_to_openai_errors(name: str, stream: bool, tmp_path):
    case = UPSTREAM_CASES[name]
    async with open_gateway(tmp_path, **NO_GATEWAY_RETRIES) as gw, openai_client(gw) as client:
        gw.sim.enqueue(case.reply)
        with capture_logs() as logs, pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model=MODEL, messages=HI, stream=stream)

    error = caught.value
    assert type(error) is case.exception and error.status_code == case.status
    body = assert_openai_envelope(error.body)
    assert body["type"] == case.error_type and body["code"] == case.code
    assert re.search(case.message, body["message"]), body
    for header, value in case.headers.items():
        assert error.response.headers.get(header) == value
    assert error.response.headers["request-id"].startswith("req_")
    (line,) = [line for line in logs.lines if line.message.startswith("POST /v1/chat/completions")]
    assert line.extra["status"] == case.status
    assert find_secrets(logs.text) == [] and find_secrets(error.response.text) == []


@pytest.mark.parametrize(
    ("request_body", "param", "message"),
    [
        ({"n": 2}, "n", "only n=1"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "Invalid value"),
        ({"messages": []}, "messages", "length"),
        ({"temperature": 5}, "temperature", "<= 2"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}
                ]
            },
            "messages[0].content[0].image_url.url",
            "does not fetch URLs",
        ),
        (
            # Found by the converter, on the Claude form of the request: still the client's field.
            {
                "messages": [
                    {"role": "system", "content": "s"},
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"},
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}}],
                    },
                ]
            },
            "messages[3].content[0].image_url.url",
            "unsupported image type 'image/bmp'",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
                        ],
                    }
                ]
            },
            "messages[0].tool_calls[0].function.arguments",
            "not valid JSON",
        ),
        (
            {"tool_choice": {"type": "function", "function": {"name": "missing"}}},
            "tool_choice.function.name",
            "missing",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 7}}}},
            "response_format.json_schema.schema",
            "not a valid JSON schema",
        ),
    ],
    ids=[
        "n",
        "role",
        "no_messages",
        "temperature",
        "http_image",
        "converter_found",
        "arguments",
        "tool_choice",
        "schema",
    ],
)
async def test_bad_requests_are_400s_naming_the_field(
    gw: Gateway, request_body: dict[str, Any], param: str, message: str
):
    body = {"model": MODEL, "messages": HI, **request_body}
    async with openai_client(gw) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(**body)
    error = assert_openai_envelope(caught.value.body)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert message in error["message"] and error["message"].startswith(param)
    assert gw.sim.requests == []


async def test_a_body_that_is_not_json_is_a_400(gw: Gateway):
    async with gw.http() as http:
        response = await http.post(
            "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert assert_openai_envelope(response.json()["error"])["message"].startswith("request body is not valid JSON")


async def test_an_oversized_body_is_a_413(tmp_path):
    async with open_gateway(tmp_path, Q2API_MAX_BODY_BYTES="2048") as gw, openai_client(gw) as client:
        with capture_logs() as logs, pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x" * 5000}])
    assert caught.value.status_code == 413
    assert assert_openai_envelope(caught.value.body)["type"] == "invalid_request_error"
    assert any(line.message.startswith("POST /v1/chat/completions") for line in logs.lines)


async def test_unknown_routes_under_chat_answer_404_and_405_in_the_openai_envelope(gw: Gateway):
    async with openai_client(gw) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.retrieve("chatcmpl-123")
    assert assert_openai_envelope(missing.value.body)["type"] == "invalid_request_error"
    async with gw.http() as http:
        response = await http.get("/v1/chat/completions")
    assert response.status_code == 405 and set(response.json()["error"]) == {"message", "type", "param", "code"}


# -- after the first byte -------------------------------------------------------------


async def test_a_failure_mid_stream_is_an_error_chunk_the_sdk_raises(gw: Gateway):
    gw.sim.enqueue(scripts.mid_stream_exception(text_before="Partial answer"))
    seen: list = []
    async with openai_client(gw) as client:
        stream = await client.chat.completions.create(model=MODEL, messages=HI, stream=True)
        with pytest.raises(openai.APIError) as raised:
            async for chunk in stream:
                seen.append(chunk)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in seen if chunk.choices) == "Partial answer"
    assert not any(chunk.choices and chunk.choices[0].finish_reason for chunk in seen)
    assert raised.value.body["type"] == "server_error" and raised.value.body["code"] in {
        "api_error",
        "overloaded_error",
    }
    assert len(gw.sim.requests) == 1


async def test_a_broken_stream_never_ends_with_done(gw: Gateway):
    gw.sim.enqueue(scripts.dropped_reply())
    async with (
        gw.http() as http,
        http.stream("POST", "/v1/chat/completions", json={"model": MODEL, "stream": True, "messages": HI}) as response,
    ):
        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert "data: [DONE]" not in lines
    assert json.loads(lines[-1].removeprefix("data: "))["error"]["code"] == "api_error"


async def test_pings_are_sse_comments(tmp_path):
    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gw:
        # A stall of forty ping intervals: a busy machine may skip some pings, never all of them.
        gw.sim.enqueue(scripts.stalled_reply(2.0, text_before="Working", text_after=" done"))
        async with (
            gw.http() as http,
            http.stream(
                "POST", "/v1/chat/completions", json={"model": MODEL, "stream": True, "messages": HI}
            ) as response,
        ):
            lines = [line async for line in response.aiter_lines() if line]
    assert ": ping" in lines and lines[-1] == "data: [DONE]"


async def test_a_client_that_leaves_closes_the_upstream_request(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("slow " * 40, chunks=40, delay=0.05))
    with capture_logs() as logs:
        async with httpx2.AsyncClient(base_url=gw.base_url, headers={"authorization": f"Bearer {CLIENT_KEY}"}) as http:
            body = {"model": MODEL, "stream": True, "messages": HI}
            async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                async for chunk in response.aiter_bytes():
                    assert b"chat.completion.chunk" in chunk
                    break
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=5)
        assert await gw.sim.wait_until(
            lambda: any(line.message.startswith("POST /v1/chat/completions") for line in logs.lines), timeout=5
        )
    assert gw.sim.streams_completed == 0
    (line,) = [line for line in logs.lines if line.message.startswith("POST /v1/chat/completions")]
    assert line.extra["status"] == 499 and "error=client_disconnected" in line.message


async def test_concurrent_doors_share_one_gateway(gw: Gateway):
    gw.sim.responder = lambda record: scripts.echo_reply(record.body)
    async with openai_client(gw) as client:
        openai_reply, claude_reply = await asyncio.gather(
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "from openai"}]),
            gw.client.messages.create(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "from claude"}]
            ),
        )
    assert "from openai" in openai_reply.choices[0].message.content
    assert "from claude" in claude_reply.content[0].text


async def test_the_gateway_retries_before_the_first_byte_on_this_door_too(tmp_path):
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path, Q2API_MAX_RETRIES="2") as url:
        sim.enqueue(scripts.server_error(500), scripts.text_reply("recovered"))
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=CLIENT_KEY, max_retries=0) as client:
            completion = await client.chat.completions.create(model=MODEL, messages=HI)
    assert completion.choices[0].message.content == "recovered" and len(sim.requests) == 2
