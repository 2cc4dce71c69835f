"""The one repair turn of a checked reply: the model's failed attempt, what was wrong, and a new request. Pure.

A reply that must match a schema (structured outputs, strict tools, a door's `response_format`)
is checked before the client sees it (q2api.translation.held_reply). When it fails, the next
upstream call is the same conversation with the failed attempt as the model's turn and the
problem as the new current message, which asks for the whole reply again.

The attempt travels as text (its tool calls written out): as a turn of tool uses it would need
results Amazon Q insists on, and the model needs to see what it wrote, not to have it run.
"""

from __future__ import annotations

from typing import Any, cast

import orjson

from q2api.amazonq.types import ChatMessage, GenerateAssistantResponseRequest
from q2api.anthropic.reply_content import ReplyContent


def attempt_text(content: ReplyContent) -> str:
    """The failed attempt as the model's turn reads it back."""
    parts = [content.text] if content.text else []
    for call in content.tool_calls:
        written = orjson.dumps(call.input).decode() if call.input is not None else "(input that is not valid JSON)"
        parts.append(f"[I called the tool {call.name} with the input {written}]")
    return "\n\n".join(parts) or "(an empty reply)"


def repaired_payload(
    payload: GenerateAssistantResponseRequest, content: ReplyContent, instruction: str
) -> GenerateAssistantResponseRequest:
    """The upstream call that asks for the reply again: `instruction` says what was wrong with `content`."""
    state = payload["conversationState"]
    current = state["currentMessage"]["userInputMessage"]
    earlier: dict[str, Any] = {key: value for key, value in current.items() if key not in ("modelId", "cachePoint")}
    context = dict(earlier.get("userInputMessageContext") or {})
    tools = context.pop("tools", None)
    if context:
        earlier["userInputMessageContext"] = context
    else:
        earlier.pop("userInputMessageContext", None)
    next_current: dict[str, Any] = {"content": instruction}
    if tools:
        next_current["userInputMessageContext"] = {"tools": tools}
    for key in ("origin", "modelId"):
        if key in current:
            next_current[key] = current[key]
    history: list[ChatMessage] = [
        *state.get("history", ()),
        cast(ChatMessage, {"userInputMessage": earlier}),
        cast(ChatMessage, {"assistantResponseMessage": {"content": attempt_text(content)}}),
    ]
    new_state = {**state, "history": history, "currentMessage": {"userInputMessage": next_current}}
    return cast(GenerateAssistantResponseRequest, {**payload, "conversationState": new_state})
