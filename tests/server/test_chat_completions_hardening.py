"""What a client sends wrong to the OpenAI door is a 400 naming the field — never a 500 (issue 26, item 9).

Each body below was a 500 with a traceback before the door used the shared body checks
(`first_too_deep` in q2api/anthropic/json_levels.py) and the bounded schema compiler (q2api/frontdoors/client_schema.py).
The fuzzing of both doors is tests/server/test_fuzz_gateway.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from q2api.anthropic.json_levels import MAX_JSON_DEPTH
from tests.support.gateway_harness import MODEL, Gateway, capture_logs
from tests.support.openai_harness import assert_openai_envelope

TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"


def nested(depth: int, leaf: Any = 1) -> Any:
    for _ in range(depth):
        leaf = {"a": leaf}
    return leaf


def body(**fields: Any) -> bytes:
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}).encode()


def with_tool_call(arguments: str) -> bytes:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    return body(messages=messages, tools=[{"type": "function", "function": {"name": "f"}}])


def response_schema(schema: Any) -> bytes:
    return body(response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})


# name → (body, the param named, what the message says)
BAD_BODIES: dict[str, tuple[bytes, str | None, str]] = {
    "invalid UTF-8": (body().replace(b'"hi"', b'"h\xffi"'), None, "request body is not valid UTF-8"),
    "deep metadata": (
        body(metadata={}).replace(b'"metadata": {}', b'"metadata": ' + b"[" * 5000 + b"]" * 5000),
        None,
        "request body is nested too deeply to parse",
    ),
    "deep tool parameters": (
        body(tools=[{"type": "function", "function": {"name": "f", "parameters": nested(MAX_JSON_DEPTH + 5)}}]),
        "tools[0].function.parameters",
        TOO_DEEP,
    ),
    "deep legacy function parameters": (
        body(functions=[{"name": "f", "parameters": nested(MAX_JSON_DEPTH + 5)}]),
        "functions[0].parameters",
        TOO_DEEP,
    ),
    "deep tool-call arguments": (
        with_tool_call(json.dumps(nested(MAX_JSON_DEPTH + 5))),
        "messages[1].tool_calls[0].function.arguments",
        TOO_DEEP,
    ),
    "deep response schema": (
        response_schema(nested(MAX_JSON_DEPTH + 5)),
        "response_format.json_schema.schema",
        TOO_DEEP,
    ),
    "recursive $ref": (response_schema({"$ref": "#"}), "response_format.json_schema.schema", "without end"),
    "unresolvable $ref": (
        response_schema({"properties": {"a": {"$ref": "#/definitions/nope"}}}),
        "response_format.json_schema.schema",
        "resolves to nothing",
    ),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_a_faulty_body_is_a_400_naming_the_field(gw: Gateway, case: str) -> None:
    content, param, problem = BAD_BODIES[case]
    with capture_logs() as logs:
        async with gw.http() as http:
            response = await http.post("/v1/chat/completions", content=content)
    assert response.status_code == 400, response.text
    assert "Traceback" not in logs.text
    assert not [line for line in logs.lines if line.level in ("ERROR", "CRITICAL")], logs.text
    error = assert_openai_envelope(response.json()["error"])
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert problem in error["message"]
    assert gw.sim.requests == []


def test_properties_nested_to_the_limit_are_checked_or_refused_cleanly() -> None:
    # {"properties": {"a": …}} is two JSON levels per schema level: 64 of them at the limit, and jsonschema
    # recurses several frames per level; the compiler refuses cleanly if Python's stack is not enough.
    from q2api.frontdoors.client_schema import SchemaRefused, compile_client_schema

    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_JSON_DEPTH // 2 - 1):
        schema = {"type": "object", "properties": {"a": schema}}
    try:
        compiled = compile_client_schema(schema)
    except SchemaRefused as refused:
        assert str(refused) == "nested too deeply to be checked"
        return
    value: Any = "text"
    for _ in range(MAX_JSON_DEPTH // 2 - 1):
        value = {"a": value}
    assert compiled.mismatch(value) in (None, "the reply nests too deeply to be checked against the JSON schema")
