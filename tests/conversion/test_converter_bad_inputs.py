"""Bad input never escapes as a raw exception: it is an InvalidRequest (400) naming the path."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.order_guard import validate_conversation
from q2api.models.table import resolve_model
from tests.support.converter_helpers import (
    PNG,
    assistant,
    convert,
    image,
    request_body,
    system,
    table_options,
    text,
    tool_result,
    tool_use,
    user,
)

SCHEMA = {"type": "object", "properties": {}}


def convert_raw(raw: bytes):
    return convert_claude_request(
        request := parse_messages_request(raw),
        ConversionOptions(conversation_id="c", model=resolve_model(request.model)),
    )


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"model": "m", "max_tokens": 1}, "messages"),
        (request_body([]), "messages"),
        (request_body([user("x")], max_tokens="many"), "max_tokens"),
        (request_body([{"role": "user", "content": 5}]), "messages.0.content"),
        (request_body([user([{"type": "hologram"}])]), "messages.0.content.0.type"),
        (
            request_body([user("x"), assistant([{"type": "tool_use", "id": "t", "name": "n", "input": [1]}])]),
            "messages.1.content.0.input",
        ),
        (
            request_body([user([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}])]),
            "messages.0.content.0.source",
        ),
        (
            request_body([user([{"type": "image", "source": {"type": "file", "file_id": "file_1"}}])]),
            "messages.0.content.0.source",
        ),
        (request_body([user([image(PNG, "image/bmp")])]), "messages.0.content.0.source.media_type"),
        (request_body([user([image("", "image/png")])]), "messages.0.content.0.source.data"),
        (request_body([user("x")], tools=[{"name": "NoSchema", "description": "d"}]), "tools.0.input_schema"),
        (request_body([user([tool_use("t1")])]), "messages.0.content.0.type"),
        (request_body([user("x"), assistant([image()])]), "messages.1.content.0.type"),
        (request_body([user("x"), assistant([tool_result("t1")])]), "messages.1.content.0.type"),
        (request_body([system([image()]), user("x")]), "messages.0.content.0.type"),
        (request_body([system(""), system(None)]), "messages"),
        (
            request_body(
                [user("go"), assistant([tool_use("t1")]), user([tool_result("t1", [image("", "image/png")])])]
            ),
            "messages.2.content.0.content.0.source.data",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_path(body, path):
    with pytest.raises(InvalidRequest) as caught:
        convert_raw(orjson.dumps(body))
    assert caught.value.status == 400
    assert caught.value.path == path
    assert path in caught.value.message


def test_url_image_message_is_clear():
    with pytest.raises(InvalidRequest) as caught:
        convert([user([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}])])
    assert "URL images are not supported" in caught.value.message and "base64" in caught.value.message


@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ([user([text("x" * 10 * 1024 * 1024)])], "messages.0.content.0.text"),
        ([user("x" * 10 * 1024 * 1024)], "messages.0.content"),
        (
            [user("go"), assistant([tool_use("t1")]), user([tool_result("t1", "y" * 700_000)])],
            "messages.2.content.0.content",
        ),
        (
            [user("go"), assistant([tool_use("t1")]), user([tool_result("t1", [text("ok"), text("y" * 700_000)])])],
            "messages.2.content.0.content.1.text",
        ),
        (
            [user("go"), assistant([{"type": "thinking", "thinking": "z" * 700_000, "signature": "s"}]), user("x")],
            "messages.1.content.0.thinking",
        ),
        ([user("go"), assistant([text("ok"), text("z" * 700_000)])], "messages.1.content.1.text"),
    ],
)
def test_an_oversized_text_block_is_prompt_too_long(messages, path):
    with pytest.raises(InvalidRequest) as caught:
        convert(messages)
    error = caught.value
    assert error.status == 400 and error.path == path
    assert error.message.startswith("prompt is too long: ")
    assert path in error.message
    assert error.envelope()["error"]["message"] == error.message


def test_the_message_limit_is_an_option():
    with pytest.raises(InvalidRequest):
        convert([user("x" * 101)], options=table_options(max_message_chars=100))
    assert convert([user("x" * 100)], options=table_options(max_message_chars=100))


# ---------------------------------------------------------------- nothing raises uncaught

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        [
            "",
            "user",
            "assistant",
            "system",
            "text",
            "image",
            "tool_use",
            "tool_result",
            "base64",
            "url",
            "image/png",
            "t1",
            "enabled",
            "none",
            "x",
        ]
    )
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "role",
                    "content",
                    "text",
                    "id",
                    "name",
                    "input",
                    "tool_use_id",
                    "source",
                    "data",
                    "media_type",
                    "is_error",
                    "messages",
                    "model",
                    "max_tokens",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)

BASE_BODY: dict[str, Any] = request_body(
    [
        system([text("env")]),
        user([text("hi"), image()]),
        assistant(
            [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                text("calling"),
                tool_use("t1"),
                tool_use("t2", "Read", {"file_path": "/a"}),
            ]
        ),
        user(
            [
                tool_result("t1", [text("out"), image()]),
                tool_result("t2", "out2", is_error=True),
                tool_result("t9", "orphan"),
            ]
        ),
        user([{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}]),
        assistant("done"),
    ],
    system=[text("sys")],
    tools=[
        {
            "name": "Bash",
            "description": "run",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
        {"name": "Read", "input_schema": SCHEMA},
    ],
    thinking={"type": "enabled", "budget_tokens": 2048},
    tool_choice={"type": "auto"},
)


def _outcome(raw: bytes) -> None:
    try:
        conversion = convert_raw(raw)
    except AnthropicError as error:
        assert error.status == 400
        return
    assert validate_conversation(conversion.payload) == ()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_arbitrary_json_bodies_only_succeed_or_raise_invalid_request(value):
    _outcome(orjson.dumps(value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_valid_bodies_only_succeed_or_raise_invalid_request(data):
    body = copy.deepcopy(BASE_BODY)
    node: Any = body
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, dict | list) and child and data.draw(st.booleans()):
            node = child
            continue
        action = data.draw(st.sampled_from(["replace", "delete"]))
        if action == "delete":
            del node[key]
        else:
            node[key] = data.draw(JSON_VALUES)
        break
    _outcome(orjson.dumps(body))


def test_base_body_converts():
    conversion = convert_raw(orjson.dumps(BASE_BODY))
    assert validate_conversation(conversion.payload) == ()


def test_garbage_bytes_are_a_400():
    for raw in (b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"messages": "x"}'):
        with pytest.raises(InvalidRequest):
            convert_raw(raw)


def test_an_oversized_system_prompt_is_prompt_too_long():
    with pytest.raises(InvalidRequest) as caught:
        convert([user("x")], system=[text("ok"), text("s" * 700_000)])
    assert caught.value.path == "system.1.text" and caught.value.message.startswith("prompt is too long")
