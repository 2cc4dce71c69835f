"""Hostile request bodies for the gateway's two parsing endpoints, as hypothesis strategies.

Shared by the CI fuzz test (tests/server/test_fuzz_gateway.py) and the longer
run (`python -m bench.fuzz_gateway`). Most bodies are Claude-shaped requests
whose every free value is hostile — control characters and line separators in
ids, names and the model, tool inputs and schemas nested at and past the
limits, images that are not images, tool results without their calls — so
that they get past the parser into the conversion; the rest are those bodies
damaged on the way (cut short, invalid UTF-8 spliced in, buried under a
thousand brackets) or plain bytes.

:func:`problem_with` says what is wrong with an answer: any 5xx, or an error
that is not the Anthropic envelope.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import strategies as st

ENDPOINTS = ("/v1/messages", "/v1/messages/count_tokens")

# Cheap to draw (a fixed list), so that thousands of bodies fit in a CI run.
_hostile_texts = st.sampled_from(
    [
        "",
        "claude-sonnet-5-5\nFORGED | CRITICAL | line",
        "a\r\nb",
        "nul\x00byte",
        "esc\x1b[31mred",
        "del\x7f c1\x85 ls\u2028 ps\u2029",
        "\ufeffbom",
        'quote" backslash\\',
        "%0A%0D",
        "日本語 naïve 🙂",
        "x" * 5000,
    ]
)
text = st.text(max_size=20) | _hostile_texts
_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | text
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    """`leaf` inside `depth` objects: the shape that overflows recursive encoders."""
    for _ in range(depth):
        leaf = {"a": leaf}
    return leaf


json_documents = st.dictionaries(text, json_values, max_size=3) | st.integers(100, 300).map(nested)
_models = st.sampled_from(["claude-sonnet-5-5", "claude-opus-4-8", "claude-3-7-sonnet-latest", "gpt-4o"]) | text
_tool_ids = st.sampled_from(["toolu_1", "toolu_2"]) | text
_tool_names = st.sampled_from(["Read", "Bash", "x" * 80]) | text
_media_types = st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain"])
_base64 = (
    st.sampled_from(
        [
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
            "",
            "!!notbase64",
            "QUJD",
        ]
    )
    | text
)


def _block(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(fields)


_text_block = _block(type=st.just("text"), text=text)
_image_block = _block(
    type=st.just("image"), source=_block(type=st.just("base64"), media_type=_media_types, data=_base64)
)
_tool_result_content = text | st.lists(_text_block | _image_block, max_size=3)
content_blocks = st.one_of(
    _text_block,
    _image_block,
    _block(type=st.just("tool_use"), id=_tool_ids, name=_tool_names, input=json_documents),
    _block(
        type=st.just("tool_result"),
        tool_use_id=_tool_ids,
        content=_tool_result_content,
        is_error=st.booleans() | st.none(),
    ),
    _block(type=st.just("thinking"), thinking=text, signature=text),
    _block(type=st.just("document"), source=_block(type=st.just("text"), media_type=st.just("text/plain"), data=text)),
    _block(type=st.just("server_tool_use"), id=_tool_ids, name=_tool_names, input=json_documents),
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system"]),
            "content": text | st.lists(content_blocks, max_size=3),
        }
    ),
    min_size=1,
    max_size=4,
)
tools = st.lists(
    st.fixed_dictionaries({"name": _tool_names, "input_schema": json_documents}, optional={"description": text})
    | st.fixed_dictionaries({"type": st.just("web_search_20250305"), "name": st.just("web_search")}),
    max_size=2,
)
requests = st.fixed_dictionaries(
    {"model": _models, "max_tokens": st.integers(-1, 2**40), "messages": messages},
    optional={
        "stream": st.booleans(),
        "system": text | st.lists(_text_block, max_size=2),
        "tools": tools,
        "tool_choice": st.fixed_dictionaries(
            {"type": st.sampled_from(["auto", "any", "tool", "none"])}, optional={"name": _tool_names}
        ),
        "thinking": st.fixed_dictionaries(
            {"type": st.sampled_from(["enabled", "adaptive", "disabled"])}, optional={"budget_tokens": st.integers()}
        ),
        "stop_sequences": st.lists(text, max_size=3),
        "temperature": st.floats(allow_nan=False) | st.none(),
        "metadata": st.fixed_dictionaries({"user_id": text | json_values.map(json.dumps)}),
        "unknown_field": json_values,
    },
)


def encoded(document: Any) -> bytes:
    """JSON bytes; the stdlib, because orjson refuses what it cannot nest or fit in 64 bits."""
    return json.dumps(document).encode()


INVALID_UTF8 = (b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")


@st.composite
def _damaged(draw: st.DrawFn) -> bytes:
    body = encoded(draw(requests))
    at = draw(st.integers(0, len(body)))
    damage = draw(st.sampled_from(["cut", "invalid utf-8", "buried"]))
    if damage == "cut":
        return body[:at]
    if damage == "invalid utf-8":
        return body[:at] + draw(st.sampled_from(INVALID_UTF8)) + body[at:]
    depth = draw(st.integers(200, 1500))
    return b"[" * depth + body + b"]" * depth


bodies = requests.map(encoded) | _damaged() | json_values.map(encoded) | st.binary(max_size=80)
"""A request body: mostly Claude-shaped and hostile, some damaged, a few plain bytes."""

cases = st.tuples(st.sampled_from(ENDPOINTS), bodies)


def problem_with(status: int, body: bytes) -> str | None:
    """What is wrong with the gateway's answer to a hostile body, or None when it is as it must be."""
    if status >= 500:
        return f"status {status}: {body[:300]!r}"
    if status < 400:
        return None
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return f"status {status} without a JSON body: {body[:300]!r}"
    if not isinstance(document, dict) or document.get("type") != "error" or not isinstance(document.get("error"), dict):
        return f"status {status} without the Anthropic envelope: {document!r:.300}"
    error = document["error"]
    if not isinstance(error.get("type"), str) or not isinstance(error.get("message"), str):
        return f"status {status}: the envelope lacks a type or a message: {document!r:.300}"
    if "Traceback" in error["message"]:
        return f"status {status}: a traceback in the message"
    return None
