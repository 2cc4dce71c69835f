"""Compaction's pure half (q2api.frontdoors.claude.compaction): when it is due, and a conversation read back from its block."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import TextBlock, read_messages_request
from q2api.frontdoors.claude.compaction import compaction_due, read_back, summary_context, summary_of


def read(messages: list[dict[str, Any]], **fields: Any):
    return read_messages_request(orjson.dumps({"model": "m", "max_tokens": 10, "messages": messages, **fields}))


def test_read_back_starts_the_conversation_at_the_last_summary_and_moves_the_breakpoints() -> None:
    cached = {"type": "ephemeral"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "old question", "cache_control": cached}]},
        {"role": "assistant", "content": [{"type": "compaction", "content": "first summary"}]},
        {"role": "user", "content": "more"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "before it"},
                {"type": "compaction", "content": "second summary"},
                {"type": "compaction", "content": None},  # a failed compaction changes nothing
                {"type": "text", "text": "after it", "cache_control": cached},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "new question", "cache_control": cached}]},
    ]
    parsed = read(messages)
    request, breakpoints = read_back(parsed.request, parsed.breakpoints)
    roles = [message.role for message in request.messages]
    assert roles == ["user", "assistant", "user"]
    assert request.messages[0].content == [TextBlock(text=summary_context("second summary"))]
    assert [type(block).__name__ for block in request.messages[1].content] == ["CompactionBlock", "TextBlock"]
    assert breakpoints == CacheBreakpoints((), (), ((1, 1), (2, 0)))  # "old question"'s went with it


def test_a_conversation_without_a_summary_is_left_as_it_is() -> None:
    parsed = read(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "compaction", "content": None}]}]
    )
    assert read_back(parsed.request, parsed.breakpoints) == (parsed.request, parsed.breakpoints)


def test_an_empty_summary_is_refused_by_name() -> None:
    parsed = read(
        [{"role": "assistant", "content": [{"type": "compaction", "content": ""}]}, {"role": "user", "content": "x"}]
    )
    with pytest.raises(InvalidRequest) as caught:
        read_back(parsed.request, parsed.breakpoints)
    assert caught.value.path == "messages.0.content.0.content"


def test_compaction_is_due_past_its_trigger_or_when_asked() -> None:
    long = [{"role": "user", "content": "word " * 60_000}]
    edit = {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50_000},
        "pause_after_compaction": True,
    }
    due = compaction_due(read(long, context_management={"edits": [edit]}).request)
    assert due is not None and due.pause and "about to be compacted" in due.instructions
    assert (
        compaction_due(read([{"role": "user", "content": "short"}], context_management={"edits": [edit]}).request)
        is None
    )
    asked = compaction_due(
        read([{"role": "user", "content": "short"}], compaction={"type": "summarize", "instructions": "  "}).request
    )
    assert asked is not None and asked.pause and "about to be compacted" in asked.instructions  # blank is none


def test_the_summary_is_read_out_of_its_tags() -> None:
    assert summary_of("Here you go.\n<summary>\nAll done.\n</summary>") == "All done."
    assert summary_of("  Plain summary. ") == "Plain summary."
    assert summary_of("   ") is None
