"""Failures on the Responses door reach the official `openai` SDK as the errors it classifies.

Every status the SDK maps (400, 401, 403, 404, 405, 413, 429 with retry-after, 500, 503), bad
requests naming the client's own field (even when a later stage found the fault), hosted tools
refused, a failure after streaming started as `error` + `response.failed` (and nothing stored),
and a client that leaves closing the upstream request.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from typing import Any

import httpx2
import openai
import pytest

from q2api.testing import scripts
from q2api.testing.scripts import Reply
from tests.support.gateway_harness import (
    CLIENT_KEY,
    MODEL,
    Gateway,
    capture_logs,
    find_secrets,
    open_gateway,
)
from tests.support.openai_harness import assert_openai_envelope, openai_client

NO_GATEWAY_RETRIES = {"Q2API_MAX_RETRIES": "0"}


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
            await client.responses.create(model=MODEL, input="hi", stream=stream)

    error = caught.value
    assert type(error) is case.exception and error.status_code == case.status
    body = assert_openai_envelope(error.body)
    assert body["type"] == case.error_type and body["code"] == case.code
    assert re.search(case.message, body["message"]), body
    for header, value in case.headers.items():
        assert error.response.headers.get(header) == value
    assert error.response.headers["request-id"].startswith("req_")
    (line,) = [line for line in logs.lines if line.message.startswith("POST /v1/responses")]
    assert line.extra["status"] == case.status
    assert find_secrets(logs.text) == [] and find_secrets(error.response.text) == []


@pytest.mark.parametrize(
    ("request_body", "param", "message"),
    [
        ({"input": [{"role": "wizard", "content": "hi"}]}, "input[0].role", "Invalid enum value"),
        ({"temperature": 5}, "temperature", "<= 2"),
        ({"model": None}, "model", "Field required"),
        ({"input": []}, "input", "no user or assistant message"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png"}]}]},
            "input[0].content[0].image_url",
            "does not fetch URLs",
        ),
        (
            # Found by the converter, on the Claude form of the request: still the client's field.
            {
                "input": [
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": [{"type": "input_image", "image_url": "data:image/bmp;base64,Qk0="}]},
                ]
            },
            "input[2].content[0].image_url",
            "unsupported image type 'image/bmp'",
        ),
        (
            {"input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{oops"}]},
            "input[0].arguments",
            "not valid JSON",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "item references"),
        ({"input": [{"type": "computer_call", "id": "cu_1"}]}, "input[0].type", "'computer_call' items"),
        (
            {"tools": [{"type": "web_search", "filters": {"allowed_domains": ["ok.test", "not a domain"]}}]},
            "tools[0].filters.allowed_domains[1]",
            "is not a domain name",
        ),
        ({"tools": [{"type": "web_search"}, {"type": "web_search_preview"}]}, "tools[1]", "only one web search"),
        ({"tools": [{"type": "web_search", "search_context_size": "all"}]}, "tools[0].search_context_size", ""),
        ({"tools": [{"type": "file_search", "vector_store_ids": ["v"]}]}, "tools[0].type", "file_search"),
        ({"tools": [{"type": "function"}]}, "tools[0].name", "Field required"),
        ({"tool_choice": {"type": "function", "name": "missing"}}, "tool_choice.name", "missing"),
        ({"tool_choice": {"type": "web_search"}}, "tool_choice.type", "does not offer"),
        ({"tool_choice": {"type": "image_generation"}}, "tool_choice.type", "not supported"),
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": 7}}}},
            "text.format.schema",
            "not a valid JSON schema",
        ),
        (
            {
                "text": {
                    "format": {"type": "json_schema", "name": "x", "schema": {"$ref": "https://example.com/s.json"}}
                }
            },
            "text.format.schema",
            "",
        ),
        ({"background": True}, "background", "not supported"),
        ({"metadata": {f"k{n}": "v" for n in range(17)}}, "metadata", "at most 16"),
        ({"conversation": "conv_1"}, "conversation", "previous_response_id"),
    ],
    ids=[
        "role",
        "temperature",
        "no_model",
        "no_input",
        "http_image",
        "converter_found",
        "arguments",
        "item_reference",
        "computer_call",
        "web_search_domain",
        "two_web_searches",
        "web_search_context_size",
        "file_search",
        "nameless_function",
        "tool_choice_name",
        "tool_choice_search_not_offered",
        "tool_choice_hosted",
        "schema",
        "remote_schema_ref",
        "background",
        "metadata",
        "conversation",
    ],
)
async def test_bad_requests_are_400s_naming_the_field(
    gw: Gateway, request_body: dict[str, Any], param: str, message: str
):
    body = {"model": MODEL, "input": "hi", **request_body}
    async with gw.http() as http:
        response = await http.post("/v1/responses", json=body)
    assert response.status_code == 400, response.text
    error = assert_openai_envelope(response.json()["error"])
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert message in error["message"] and error["message"].startswith(param)
    assert gw.sim.requests == []


async def test_the_sdk_raises_bad_request_for_a_hosted_tool(gw: Gateway):
    async with openai_client(gw) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model=MODEL, input="code?", tools=[{"type": "code_interpreter"}])
    error = assert_openai_envelope(caught.value.body)
    assert error["code"] == "unsupported_tool" and "'code_interpreter'" in error["message"]


async def test_a_body_that_is_not_sent_as_json_is_a_415(gw: Gateway):
    async with gw.http() as http:
        response = await http.post(
            "/v1/responses", content=b'{"model": "m", "input": "hi"}', headers={"content-type": "text/plain"}
        )
    assert response.status_code == 415
    assert_openai_envelope(response.json()["error"])
    assert gw.sim.requests == []


async def test_a_body_that_is_not_json_is_a_400(gw: Gateway):
    async with gw.http() as http:
        response = await http.post("/v1/responses", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert assert_openai_envelope(response.json()["error"])["message"].startswith("request body is not valid JSON")


async def test_a_wrong_key_is_a_401_and_a_large_body_a_413(tmp_path):
    async with open_gateway(tmp_path, Q2API_MAX_BODY_BYTES="2048") as gw:
        async with openai_client(gw, api_key="not-a-key") as stranger:
            with capture_logs() as logs, pytest.raises(openai.AuthenticationError) as denied:
                await stranger.responses.create(model=MODEL, input="hi")
            with pytest.raises(openai.AuthenticationError):
                await stranger.responses.retrieve("resp_1")
        async with openai_client(gw) as client:
            with pytest.raises(openai.APIStatusError) as too_large:
                await client.responses.create(model=MODEL, input="x" * 5000)
    assert assert_openai_envelope(denied.value.body)["type"] == "authentication_error"
    assert too_large.value.status_code == 413
    assert any(line.message.startswith("POST /v1/responses") and line.extra["status"] == 401 for line in logs.lines)
    assert gw.sim.requests == []


async def test_unknown_ids_are_404_and_other_methods_405(gw: Gateway):
    async with openai_client(gw) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.responses.create(model=MODEL, input="hi", previous_response_id="resp_nope")
        with pytest.raises(openai.NotFoundError):
            await client.responses.input_items.list("resp_nope")
    error = assert_openai_envelope(missing.value.body)
    assert error["code"] == "previous_response_not_found" and error["param"] == "previous_response_id"
    async with gw.http() as http:
        put = await http.put("/v1/responses", json={})
        bad_limit = await http.get("/v1/responses/resp_x/input_items?limit=0")
    assert put.status_code == 405 and set(put.json()["error"]) == {"message", "type", "param", "code"}
    assert bad_limit.status_code in (400, 404)
    assert gw.sim.requests == []


# -- after the first byte -------------------------------------------------------------


async def test_a_failure_mid_stream_is_a_failed_response_and_nothing_is_stored(gw: Gateway):
    gw.sim.enqueue(scripts.mid_stream_exception(text_before="Partial answer"))
    async with openai_client(gw) as client:
        async with client.responses.stream(model=MODEL, input="hi") as stream:
            events = [event async for event in stream]
            with pytest.raises(RuntimeError, match=r"response\.completed"):
                await stream.get_final_response()
        failed = events[-1]
        assert [event.type for event in events][-2:] == ["error", "response.failed"]
        assert events[-2].code == "server_error" and events[-2].message
        assert failed.response.status == "failed" and failed.response.error.code == "server_error"
        (message,) = failed.response.output
        assert message.content[0].text == "Partial answer"  # what arrived before the failure
        assert [event.sequence_number for event in events] == list(range(len(events)))
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(failed.response.id)
    assert len(gw.sim.requests) == 1


async def test_a_throttled_stream_says_rate_limit_exceeded(gw: Gateway):
    """Codex retries a `response.failed` whose code is rate_limit_exceeded."""
    gw.sim.enqueue(
        scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("Partial"),
            scripts.exception_frame("Rate exceeded", exception_type="ThrottlingException"),
        )
    )
    async with openai_client(gw) as client, client.responses.stream(model=MODEL, input="hi") as stream:
        events = [event async for event in stream]
    assert events[-1].type == "response.failed"
    assert events[-1].response.error.code == "rate_limit_exceeded"


async def test_pings_are_sse_comments(tmp_path):
    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gw:
        # A stall of forty ping intervals: a busy machine may skip some pings, never all of them.
        gw.sim.enqueue(scripts.stalled_reply(2.0, text_before="Working", text_after=" done"))
        async with (
            gw.http() as http,
            http.stream("POST", "/v1/responses", json={"model": MODEL, "stream": True, "input": "hi"}) as response,
        ):
            lines = [line async for line in response.aiter_lines() if line]
    assert ": ping" in lines and lines[-1].startswith("data: ") and "response.completed" in lines[-1]


async def test_a_client_that_leaves_closes_the_upstream_request(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("slow " * 40, chunks=40, delay=0.05))
    with capture_logs() as logs:
        async with httpx2.AsyncClient(base_url=gw.base_url, headers={"authorization": f"Bearer {CLIENT_KEY}"}) as http:
            body = {"model": MODEL, "stream": True, "input": "hi"}
            async with http.stream("POST", "/v1/responses", json=body) as response:
                async for chunk in response.aiter_bytes():
                    assert b"response.created" in chunk
                    break
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=5)
        assert await gw.sim.wait_until(
            lambda: any(line.message.startswith("POST /v1/responses") for line in logs.lines), timeout=5
        )
    assert gw.sim.streams_completed == 0
    (line,) = [line for line in logs.lines if line.message.startswith("POST /v1/responses")]
    assert line.extra["status"] == 499 and "error=client_disconnected" in line.message


def nested_json(levels: int) -> str:
    return '{"a":' * levels + "{}" + "}" * levels


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        (
            f'{{"model": "{MODEL}", "input": "hi", "tools": [{{"type": "function", "name": "f", "parameters": {nested_json(600)}}}]}}',
            "tools[0].parameters",
            "nested more than 128",
        ),
        (
            f'{{"model": "{MODEL}", "input": [{{"type": "function_call", "call_id": "c", "name": "f", "arguments": {json.dumps(nested_json(600))}}}]}}',
            "input[0].arguments",
            "nested more than 128",
        ),
        (
            f'{{"model": "{MODEL}", "input": "hi", "text": {{"format": {{"type": "json_schema", "name": "x", "schema": {nested_json(600)}}}}}}}',
            "text.format.schema",
            "nested more than 128",
        ),
        (
            f'{{"model": "{MODEL}", "input": "hi", "client_metadata": {nested_json(5000)}}}',
            None,
            "nested too deeply to parse",
        ),
        ('{"model": "m", "input": "\udcff"}', None, "not valid UTF-8"),
    ],
    ids=["tool_schema", "arguments", "text_format_schema", "ignored_field", "utf8"],
)
async def test_hostile_bodies_are_400s(gw: Gateway, body: str, param: str | None, message: str):
    """Never a 500: deep free-form JSON (which the upstream encoders could not follow) and bodies that are not UTF-8."""
    async with gw.http() as http:
        response = await http.post(
            "/v1/responses",
            content=body.encode("utf-8", "surrogateescape"),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400, response.text
    error = assert_openai_envelope(response.json()["error"])
    assert error["param"] == param and message in error["message"]
    assert gw.sim.requests == []


async def test_a_store_that_fails_degrades_to_a_logged_warning_and_503s(gw: Gateway, tmp_path):
    """The reply still goes out when its response cannot be stored; reading the store is a 503, never a 500."""
    with sqlite3.connect(tmp_path / "q2api.sqlite3") as db:
        db.execute("DROP TABLE q2api_responses")  # every later read or write of it fails
    gw.sim.enqueue(scripts.text_reply("answered anyway"))
    async with openai_client(gw) as client:
        with capture_logs() as logs:
            response = await client.responses.create(model=MODEL, input="hi")
        assert response.output_text == "answered anyway"
        assert any("was answered but not stored" in line.message for line in logs.lines)
        for attempt in (
            client.responses.retrieve(response.id),
            client.responses.create(model=MODEL, input="more", previous_response_id=response.id),
        ):
            with pytest.raises(openai.InternalServerError) as caught:
                await attempt
            assert caught.value.status_code == 503
            assert assert_openai_envelope(caught.value.body)["code"] == "store_unavailable"
    assert "Traceback" not in logs.text
