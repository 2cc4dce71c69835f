"""The depth limit on forwarded documents: all of a request's tool inputs and schemas are measured
at once, and a request is refused exactly when one of them nests past MAX_JSON_DEPTH, naming it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.json_levels import MAX_JSON_DEPTH
from q2api.anthropic.types import parse_messages_request


def depth(value: Any) -> int:
    """Containers from the outside in (the document itself counts as one)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """An object nested around the limit, with objects and lists, a scalar, an empty container or
    nothing at the bottom, and shallow siblings on the way."""
    levels = draw(
        st.sampled_from([1, 2, 5, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 3])
    )
    value: Any = draw(st.sampled_from([1, "x", None, {}, []]))
    for level in range(levels - 1):
        if draw(st.booleans()):
            value = [value, "sibling"] if level % 3 else [value]
        else:
            value = {"a": value, "b": {"c": 1}} if level % 5 == 0 else {"a": value}
    return {"deep": value}


def request_body(schemas: list[dict[str, Any]], inputs: list[dict[str, Any]]) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for number, tool_input in enumerate(inputs):
        tool_id = f"toolu_{number}"
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "f", "input": tool_input}]}
        )
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]})
    tools = [{"name": f"t{index}", "input_schema": schema} for index, schema in enumerate(schemas)]
    return orjson.dumps({"model": "m", "max_tokens": 1, "messages": messages, "tools": tools})


@given(st.lists(documents(), max_size=3), st.lists(documents(), max_size=3))
def test_refused_exactly_when_one_document_is_too_deep(schemas, inputs) -> None:
    paths = [f"tools.{index}.input_schema" for index in range(len(schemas))]
    paths += [f"messages.{1 + 2 * number}.content.0.input" for number in range(len(inputs))]
    too_deep = [
        path for path, document in zip(paths, [*schemas, *inputs], strict=True) if depth(document) > MAX_JSON_DEPTH
    ]
    body = request_body(schemas, inputs)
    if not too_deep:
        parse_messages_request(body)
        return
    with pytest.raises(InvalidRequest) as refused:
        parse_messages_request(body)
    assert refused.value.message == f"{too_deep[0]}: nested more than {MAX_JSON_DEPTH} levels deep"
