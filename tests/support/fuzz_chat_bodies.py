"""Hostile request bodies for the OpenAI door (`POST /v1/chat/completions`), as hypothesis strategies.

The OpenAI-shaped counterpart of tests/support/fuzz_bodies.py, from the same hostile values:
messages of every role with hostile text, parts (images that are not images or are URLs, files,
audio), tool calls whose `arguments` are not JSON or nest past the limits, tools whose
`parameters` do, `metadata` buried deep, and `response_format` schemas built to hurt a
validator — remote and file references, references that resolve nowhere or to themselves,
patterns that backtrack or that RE2 cannot compile, a `$schema` nested or unknown, anything
at all — then the same damage on the way (cut, invalid UTF-8, buried).

`door_cases` draws from both doors; `door_problem(endpoint, status, body)` says what is wrong
with an answer, in the envelope of the endpoint's door.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import strategies as st

from tests.support.fuzz_bodies import (
    INVALID_UTF8,
    cases,
    encoded,
    json_documents,
    json_values,
    nested,
    problem_with,
    text,
)

CHAT_ENDPOINT = "/v1/chat/completions"

_names = st.sampled_from(["get_weather", "Read", "x" * 80]) | text
_call_ids = st.sampled_from(["call_1", "call_2"]) | text
_image_urls = (
    st.sampled_from(
        [
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
            "data:image/png;base64,!!notbase64",
            "data:,",
            "http://169.254.169.254/latest/meta-data/",
            "file:///etc/passwd",
        ]
    )
    | text
)
_arguments = (
    json_documents.map(json.dumps) | text | st.integers(129, 160).map(lambda depth: json.dumps(nested(depth)))
)  # just past the limit
_parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": text}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": _image_urls})}),
    st.fixed_dictionaries(
        {
            "type": st.just("file"),
            "file": st.fixed_dictionaries({}, optional={"file_data": _image_urls, "file_id": text}),
        }
    ),
    st.fixed_dictionaries({"type": st.just("input_audio"), "input_audio": json_values}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": text}),
)
_content = text | st.lists(_parts, max_size=3) | st.none()
_tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": _call_ids,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": _names, "arguments": _arguments}),
        }
    ),
    max_size=2,
)
_messages = st.lists(
    st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["system", "developer", "user"]), "content": _content}),
        st.fixed_dictionaries(
            {"role": st.just("assistant")},
            optional={
                "content": _content,
                "tool_calls": _tool_calls,
                "function_call": st.fixed_dictionaries({"name": _names, "arguments": _arguments}),
                "refusal": text,
            },
        ),
        st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": _call_ids, "content": _content}),
        st.fixed_dictionaries({"role": st.just("function"), "name": _names}, optional={"content": text}),
    ),
    min_size=1,
    max_size=4,
)
_REFERENCES = [
    "http://127.0.0.1:9/schema.json",
    "https://169.254.169.254/latest/meta-data/",
    "file:///etc/passwd",
    "other.json#/x",
    "#",
    "#/$defs/missing",
    "#/$defs/a",
    "#/properties/a",
    "#anchor",
]
_PATTERNS = ["^(a+)+$", "(?=x)", "(a)\\1", "[", "^[a-z]{2,8}$", "\\d+", "(x+x+)+y", "a{1000}{1000}"]
_keywords = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["object", "string", "integer", "array", "nope"]) | json_values,
        "$ref": st.sampled_from(_REFERENCES) | text,
        "$dynamicRef": st.sampled_from(_REFERENCES),
        "pattern": st.sampled_from(_PATTERNS) | text,
        "$schema": st.sampled_from(["http://json-schema.org/draft-07/schema#", "https://example.com/nope"])
        | json_values,
        "$id": st.sampled_from(["http://evil.example/root", "urn:x", "#frag"]) | text,
        "$anchor": st.just("anchor"),
        "unevaluatedProperties": st.booleans(),
        "additionalProperties": st.booleans(),
        "required": st.lists(text, max_size=2),
    },
)
hostile_schemas = st.recursive(
    _keywords,
    lambda inner: st.one_of(
        st.tuples(_keywords, st.dictionaries(text, inner, max_size=2)).map(lambda kp: {**kp[0], "properties": kp[1]}),
        st.tuples(_keywords, st.dictionaries(st.sampled_from(_PATTERNS), inner, max_size=2)).map(
            lambda kp: {**kp[0], "patternProperties": kp[1]}
        ),
        st.tuples(_keywords, st.lists(inner, min_size=1, max_size=2)).map(lambda kl: {**kl[0], "anyOf": kl[1]}),
        st.tuples(_keywords, st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)).map(
            lambda kd: {**kd[0], "$defs": kd[1]}
        ),
    ),
    max_leaves=6,
)
_response_formats = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "nope"])}),
    st.fixed_dictionaries(
        {
            "type": st.just("json_schema"),
            "json_schema": st.fixed_dictionaries(
                {"name": text},
                optional={"schema": hostile_schemas | json_documents | json_values, "strict": st.booleans()},
            ),
        }
    ),
)
_tools = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": _names}, optional={"parameters": json_documents | hostile_schemas}
            ),
        }
    ),
    max_size=2,
)
chat_requests = st.fixed_dictionaries(
    {"model": st.sampled_from(["claude-sonnet-5-5", "gpt-4o"]) | text, "messages": _messages},
    optional={
        "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
        "max_tokens": st.integers(-1, 2**40),
        "max_completion_tokens": st.integers(-1, 2**40),
        "n": st.integers(0, 3),
        "temperature": st.floats(allow_nan=False) | st.none(),
        "stop": text | st.lists(text, max_size=3),
        "tools": _tools,
        "tool_choice": st.sampled_from(["auto", "none", "required", "nope"])
        | st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": _names})}),
        "parallel_tool_calls": st.booleans(),
        "functions": st.lists(
            st.fixed_dictionaries({"name": _names}, optional={"parameters": json_documents}), max_size=2
        ),
        "function_call": st.sampled_from(["auto", "none"]) | st.fixed_dictionaries({"name": _names}),
        "reasoning_effort": st.sampled_from(["none", "low", "high", "nope"]),
        "response_format": _response_formats,
        "metadata": json_values | st.integers(100, 300).map(nested),
    },
)


@st.composite
def _damaged(draw: st.DrawFn) -> bytes:
    body = encoded(draw(chat_requests))
    at = draw(st.integers(0, len(body)))
    damage = draw(st.sampled_from(["cut", "invalid utf-8", "buried", "deep metadata"]))
    if damage == "cut":
        return body[:at]
    if damage == "invalid utf-8":
        return body[:at] + draw(st.sampled_from(INVALID_UTF8)) + body[at:]
    depth = draw(st.integers(200, 1500))
    if damage == "deep metadata":
        return body[:-1] + b', "metadata": ' + b"[" * depth + b"]" * depth + b"}"
    return b"[" * depth + body + b"]" * depth


chat_bodies = chat_requests.map(encoded) | _damaged() | json_values.map(encoded) | st.binary(max_size=80)
"""A request body for the OpenAI door: mostly OpenAI-shaped and hostile, some damaged, a few plain bytes."""

chat_cases = st.tuples(st.just(CHAT_ENDPOINT), chat_bodies)
door_cases = cases | chat_cases
"""(endpoint, body) for every door."""


def chat_problem_with(status: int, body: bytes) -> str | None:
    """What is wrong with the OpenAI door's answer to a hostile body, or None when it is as it must be."""
    if status >= 500:
        return f"status {status}: {body[:300]!r}"
    if status < 400:
        return None
    try:
        document: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return f"status {status} without a JSON body: {body[:300]!r}"
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict) or set(error) != {"message", "type", "param", "code"}:
        return f"status {status} without the OpenAI envelope: {document!r:.300}"
    if not isinstance(error["message"], str) or not isinstance(error["type"], str):
        return f"status {status}: the envelope lacks a type or a message: {document!r:.300}"
    if "Traceback" in error["message"]:
        return f"status {status}: a traceback in the message"
    return None


def door_problem(endpoint: str, status: int, body: bytes) -> str | None:
    """What is wrong with an answer, judged by the envelope of the door `endpoint` belongs to."""
    return chat_problem_with(status, body) if endpoint == CHAT_ENDPOINT else problem_with(status, body)
