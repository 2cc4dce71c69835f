"""Client input that used to make the gateway answer 500, and what a 500 (a gateway bug) must still do.

Invalid UTF-8, JSON nested past the decoder's recursion limit and tool inputs or
schemas nested past the upstream encoder's limit are the client's mistakes: a 400
`invalid_request_error` naming the problem, on both endpoints that parse a request.
A real gateway bug is a plain 500 that closes the connection, keeps the request's
log line and ties its traceback to the request id.
"""

from __future__ import annotations

import json

import pytest

from q2api.anthropic.json_levels import MAX_JSON_DEPTH
from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, REQUEST_ID, assert_error_envelope, capture_logs

ENDPOINTS = ["/v1/messages", "/v1/messages/count_tokens"]


def nested_object(depth: int) -> object:
    """A JSON object `depth` levels deep (the outermost object counts as one)."""
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def encoded(document: object) -> bytes:
    return json.dumps(document).encode()  # the stdlib: orjson refuses to nest past 254 levels


def body_with(**fields: object) -> bytes:
    return encoded({"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}], **fields})


def with_tool_call(tool_input: object) -> bytes:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": tool_input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}]},
    ]
    return encoded({"model": MODEL, "max_tokens": 20, "messages": messages})


BAD_BODIES = {
    "invalid UTF-8": (body_with().replace(b'"hi"', b'"h\xff\xfei"'), "not valid UTF-8"),
    "nested 1,000 levels": (
        body_with()[:-1] + b',"metadata":{"x":' + b"[" * 1000 + b"]" * 1000 + b"}}",
        "nested too deeply",
    ),
    "tool input nested 300 levels": (
        with_tool_call(nested_object(300)),
        f"messages.1.content.0.input: nested more than {MAX_JSON_DEPTH} levels deep",
    ),
    "tool schema nested 300 levels": (
        body_with(tools=[{"name": "f", "input_schema": {"type": "object", "x": nested_object(300)}}]),
        f"tools.0.input_schema: nested more than {MAX_JSON_DEPTH} levels deep",
    ),
}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_malformed_client_input_is_a_400_naming_the_problem(gw, endpoint, case) -> None:
    body, expected = BAD_BODIES[case]
    with capture_logs() as logs:
        async with gw.http() as http:
            response = await http.post(endpoint, content=body)
    assert response.status_code == 400, response.text
    assert expected in assert_error_envelope(response.json(), "invalid_request_error")
    assert "Traceback" not in logs.text
    assert gw.sim.requests == []


async def test_a_tool_input_at_the_depth_limit_is_served(gw) -> None:
    gw.sim.enqueue(scripts.text_reply("ok"))
    async with gw.http() as http:
        response = await http.post("/v1/messages", content=with_tool_call(nested_object(MAX_JSON_DEPTH)))
    assert response.status_code == 200, response.text
    assert len(gw.sim.requests) == 1


async def test_a_gateway_bug_closes_the_connection_and_keeps_the_log_line(gw, monkeypatch) -> None:
    from q2api.server.lifecycle.relay import MessagesRelay

    async def broken(self, *args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(MessagesRelay, "handle", broken)
    with capture_logs() as logs:
        async with gw.http() as http:
            response = await http.post("/v1/messages", content=body_with())
    assert response.status_code == 500
    assert_error_envelope(response.json(), "api_error")
    assert response.headers["connection"] == "close"
    request_id = response.headers["request-id"]
    assert REQUEST_ID.match(request_id)
    errors = [line for line in logs.lines if line.message.startswith("unhandled error")]
    assert [line.extra.get("request_id") for line in errors] == [request_id]
    assert "RuntimeError: a bug" in logs.text  # the traceback is in the log, not in the answer
    request_lines = [line for line in logs.request_lines() if line.extra.get("request_id") == request_id]
    assert [line.extra["status"] for line in request_lines] == [500]


async def test_debug_dumps_of_a_deeply_nested_body_are_skipped_not_fatal(tmp_path) -> None:
    from tests.support.gateway_harness import open_gateway

    body = body_with()[:-1] + b',"metadata":{"x":' + b"[" * 600 + b"]" * 600 + b"}}"
    async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true") as gw:
        with capture_logs() as logs:  # at DEBUG: the redacted dumps are built
            async with gw.http() as http:
                response = await http.post("/v1/messages", content=body)
    assert response.status_code == 200, response.text
    assert any(line.message.startswith("Claude request (redacted): (not shown") for line in logs.lines)
