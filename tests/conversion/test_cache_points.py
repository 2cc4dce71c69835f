"""`cache_control` breakpoints: taken out of the parsed request, placed as Amazon Q cachePoints (pure)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import parse_messages_request, parse_messages_request_with_breakpoints
from q2api.conversion.cache_points import CACHE_POINT, with_cache_points
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.models.table import resolve_model

MARK = {"cache_control": {"type": "ephemeral"}}
OPTIONS = ConversionOptions(conversation_id="c", model=resolve_model("claude-sonnet-4-5"))


def body(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    return orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": messages, **extra})


def test_breakpoints_are_found_and_cleared() -> None:
    raw = body(
        [
            {"role": "user", "content": [{"type": "text", "text": "a", **MARK}]},
            {"role": "assistant", "content": "b"},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r", **MARK}]},
                    {"type": "text", "text": "c"},
                ],
            },
        ],
        system=[{"type": "text", "text": "s1"}, {"type": "text", "text": "s2", **MARK}],
        tools=[{"name": "x", "input_schema": {"type": "object"}, **MARK}],
    )
    request, breakpoints = parse_messages_request_with_breakpoints(raw)
    assert breakpoints == CacheBreakpoints(system=(1,), tools=(0,), messages=((0, 0), (2, 0)))
    assert b"cache_control" not in msgspec.json.encode(request).replace(b'"cache_control":null', b"")


def test_a_fifth_breakpoint_is_refused_as_at_anthropic() -> None:
    blocks = [{"type": "text", "text": str(i), **MARK} for i in range(5)]
    with pytest.raises(
        InvalidRequest, match=re.escape("A maximum of 4 blocks with cache_control may be provided. Found 5.")
    ):
        parse_messages_request_with_breakpoints(body([{"role": "user", "content": blocks}]))


@settings(max_examples=60, deadline=None)
@given(marks=st.lists(st.booleans(), min_size=1, max_size=8))
def test_requests_that_differ_only_by_markers_parse_equal(marks: list[bool]) -> None:
    messages = [
        {"role": role, "content": [{"type": "text", "text": f"m{i}", **(MARK if marked else {})}]}
        for i, (role, marked) in enumerate(zip(["user", "assistant"] * 4, marks, strict=False))
    ]
    plain = [{**message, "content": [{"type": "text", "text": message["content"][0]["text"]}]} for message in messages]
    if sum(marks) > 4:
        return
    assert parse_messages_request(body(messages)).messages == parse_messages_request(body(plain)).messages


def test_points_land_on_the_messages_holding_the_marked_blocks_without_touching_shared_entries() -> None:
    raw = body(
        [
            {"role": "user", "content": [{"type": "text", "text": "first", **MARK}]},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": [{"type": "text", "text": "now", **MARK}]},
        ],
        system=[{"type": "text", "text": "sys", **MARK}],
        tools=[
            {"name": "a", "description": "A", "input_schema": {"type": "object"}},
            {"name": "b", "description": "B", "input_schema": {"type": "object"}, **MARK},
        ],
    )
    request, breakpoints = parse_messages_request_with_breakpoints(raw)
    conversion = convert_claude_request(request, OPTIONS)
    before = orjson.dumps(conversion.payload)
    payload = with_cache_points(conversion, request, breakpoints)
    assert (
        orjson.dumps(conversion.payload) == before
    )  # the conversion's own body (shared with checkpoints) is unchanged
    state = payload["conversationState"]
    history = state["history"]
    marked = [i for i, entry in enumerate(history) if "cachePoint" in next(iter(entry.values()))]
    assert marked == [0, 2]  # the system context message and the first user message
    assert state["currentMessage"]["userInputMessage"]["cachePoint"] == CACHE_POINT
    tools = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["tools"]
    assert [next(iter(tool)) for tool in tools] == ["toolSpecification", "toolSpecification", "cachePoint"]


def test_no_breakpoints_is_the_same_body() -> None:
    request, breakpoints = parse_messages_request_with_breakpoints(body([{"role": "user", "content": "x"}]))
    conversion = convert_claude_request(request, OPTIONS)
    assert with_cache_points(conversion, request, breakpoints) is conversion.payload
