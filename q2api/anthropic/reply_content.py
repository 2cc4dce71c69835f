"""What one finished reply said, read off its stream events: its text, its tool calls, why it stopped;
and what judges it.

A reply that must match a schema (structured outputs, strict tools, the OpenAI doors'
`response_format`) is judged by the request's `ReplyCheck` (a front door builds it) on this,
whichever door the request came in by: the events are the Claude ones every door's reply is
made of (q2api.translation.held_reply holds them until then).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import StreamEvent


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: Any  # the parsed input; None when its JSON did not parse


@dataclass(frozen=True, slots=True)
class ReplyContent:
    stop_reason: str | None
    text: str  # the text blocks, joined
    tool_calls: tuple[ToolCall, ...]


def reply_content(events: Iterable[StreamEvent]) -> ReplyContent:
    texts: list[str] = []
    calls: dict[int, tuple[str, str, list[str]]] = {}
    stop_reason: str | None = None
    for event in events:
        if event["type"] == "content_block_start":
            block: Any = event["content_block"]
            if block["type"] == "tool_use":
                calls[event["index"]] = (block["id"], block["name"], [])
        elif event["type"] == "content_block_delta":
            delta: Any = event["delta"]
            if delta["type"] == "text_delta":
                texts.append(delta["text"])
            elif delta["type"] == "input_json_delta" and event["index"] in calls:
                calls[event["index"]][2].append(delta["partial_json"])
        elif event["type"] == "message_delta":
            stop_reason = event["delta"]["stop_reason"]
    return ReplyContent(stop_reason, "".join(texts), tuple(_call(*parts) for parts in calls.values()))


def _call(call_id: str, name: str, fragments: list[str]) -> ToolCall:
    try:
        value = orjson.loads("".join(fragments)) if fragments else {}
    except orjson.JSONDecodeError:
        value = None
    return ToolCall(call_id, name, value)


class Undecided(str):
    """A problem the check could not decide (out of time, nested too deeply, unresolvable): asking the model
    for another reply cannot help, and checking that one would cost as much again."""

    __slots__ = ()


class ReplyCheck(Protocol):
    """What a reply must be."""

    def problem(self, content: ReplyContent) -> str | None:
        """Why the finished reply is not what was asked for, or None when it is (or is not judged)."""
        ...

    def repair_prompt(self, problem: str) -> str | None:
        """What the model is told when it gets one more try; None when another try cannot help (the check
        itself could not decide, say)."""
        ...

    def failure(self, problem: str) -> AnthropicError | None:
        """The error for a reply still wrong after its repair turn; None: the reply as it is (its door judges it)."""
        ...
