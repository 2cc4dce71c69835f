"""Context editing as the gateway applies it (q2api.frontdoors.claude.context_editing): pure, on parsed requests."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic.types import MessagesRequest, ThinkingBlock, ToolResultBlock, ToolUseBlock, parse_messages_request
from q2api.frontdoors.claude.context_editing import CLEARED_RESULT, apply_context_edits


def request_of(messages: list[dict[str, Any]], edits: list[dict[str, Any]]) -> MessagesRequest:
    body = {"model": "m", "max_tokens": 10, "messages": messages, "context_management": {"edits": edits}}
    return parse_messages_request(orjson.dumps(body))


def agent_loop(tools: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for number, name in enumerate(tools):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{number}", "name": name, "input": {"n": number}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{number}", "content": f"result {number} " * 20}],
            }
        )
    return messages


def results(request: MessagesRequest) -> list[Any]:
    return [
        block.content
        for message in request.messages
        if isinstance(message.content, list)
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


@settings(max_examples=60, deadline=None)
@given(
    tools=st.lists(st.sampled_from(["Read", "Grep", "Bash"]), max_size=12),
    keep=st.integers(0, 6),
    excluded=st.sets(st.sampled_from(["Read", "Grep", "Bash"])),
)
def test_clearing_keeps_the_newest_uses_and_the_excluded_tools_and_counts_what_it_cleared(
    tools: list[str], keep: int, excluded: set[str]
) -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 0},
        "keep": {"type": "tool_uses", "value": keep},
        "exclude_tools": sorted(excluded),
    }
    original = request_of(agent_loop(tools), [edit])
    before = results(original)
    edited, applied = apply_context_edits(original)
    after = results(edited)
    assert len(edited.messages) == len(original.messages) and results(original) == before  # a copy, never in place
    expected = [index for index, name in enumerate(tools) if index < len(tools) - keep and name not in excluded]
    assert [index for index, content in enumerate(after) if content == CLEARED_RESULT] == expected
    if expected:
        (report,) = applied
        assert report["type"] == "clear_tool_uses_20250919" and report["cleared_tool_uses"] == len(expected)
        assert report["cleared_input_tokens"] > 0
    else:
        assert applied == ()


def test_clear_at_least_clears_nothing_when_too_little_would_go() -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
        "clear_at_least": {"type": "input_tokens", "value": 5000},
    }
    request = request_of(agent_loop(["Read", "Read", "Read"]), [edit])
    assert apply_context_edits(request) == (request, ())


def test_the_input_token_trigger_is_the_gateways_estimate() -> None:
    messages = agent_loop(["Read"] * 4)
    low = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 100},
        "keep": {"type": "tool_uses", "value": 1},
    }
    high = {**low, "trigger": {"type": "input_tokens", "value": 10_000_000}}
    assert apply_context_edits(request_of(messages, [low]))[1]
    assert not apply_context_edits(request_of(messages, [high]))[1]


def test_clear_tool_inputs_names_the_tools_whose_inputs_go() -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 0},
        "keep": {"type": "tool_uses", "value": 0},
        "clear_tool_inputs": ["Bash"],
    }
    edited, _ = apply_context_edits(request_of(agent_loop(["Read", "Bash"]), [edit]))
    inputs = [
        block.input
        for message in edited.messages
        if isinstance(message.content, list)
        for block in message.content
        if isinstance(block, ToolUseBlock)
    ]
    assert inputs == [{"n": 0}, {}]


def thinking_conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"thought {turn}", "signature": "s"},
                    {"type": "text", "text": f"answer {turn}"},
                ],
            }
        )
        messages.append({"role": "user", "content": f"next {turn}"})
    return messages


def thoughts(request: MessagesRequest) -> list[str]:
    return [
        block.thinking
        for message in request.messages
        if isinstance(message.content, list)
        for block in message.content
        if isinstance(block, ThinkingBlock)
    ]


def test_clear_thinking_keeps_the_newest_turns_and_all_keeps_everything() -> None:
    two = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
    edited, (report,) = apply_context_edits(request_of(thinking_conversation(4), [two]))
    assert thoughts(edited) == ["thought 2", "thought 3"]
    assert (report["cleared_thinking_turns"], report["type"]) == (2, "clear_thinking_20251015")
    default, (report,) = apply_context_edits(
        request_of(thinking_conversation(3), [{"type": "clear_thinking_20251015"}])
    )
    assert thoughts(default) == ["thought 2"] and report["cleared_thinking_turns"] == 2
    for keep_all in ("all", {"type": "all"}):
        request = request_of(thinking_conversation(3), [{"type": "clear_thinking_20251015", "keep": keep_all}])
        assert apply_context_edits(request) == (request, ())
