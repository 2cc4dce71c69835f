"""Claude `cache_control` breakpoints → Amazon Q `cachePoint`s (docs/protocol.md#prompt-caching-and-metering). Pure.

Amazon Q takes `cachePoint: {"type": "default"}` as a member of a user or assistant message and
as an element of the `tools` list [R QCLI `shape_user_input_message.rs`,
`shape_assistant_response_message.rs`, `shape_tool.rs`]. It has no system field, so a breakpoint
on the system prompt marks the history message that carries it (the synthetic context pair's
user message, q2api.conversion.system_context); a breakpoint on a message block marks the Amazon
Q message that Claude message went into (merged turns share one); a breakpoint on a tool puts a
`cachePoint` element right after that tool's spec. Several breakpoints landing on one message
make one point.

What no source shows is Kiro honouring them (docs/protocol.md#prompt-caching-and-metering: no peer shows Kiro honouring one), so
the figures the client sees are only ever what the upstream reports back
(`metadataEvent.tokenUsage.cacheReadInputTokens` / `cacheWriteInputTokens`, q2api.translation.usage)
— zero when it reports nothing, never an estimate.

The history messages are shared with conversion checkpoints (q2api.conversion.checkpoints): a
marked message is a copy, never the shared dict changed.
"""

from __future__ import annotations

from typing import Any, cast

from q2api.amazonq.types import ChatMessage, GenerateAssistantResponseRequest
from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.types import MessagesRequest
from q2api.conversion.options import Conversion

CACHE_POINT = {"type": "default"}


def with_cache_points(
    conversion: Conversion, request: MessagesRequest, breakpoints: CacheBreakpoints
) -> GenerateAssistantResponseRequest:
    """The conversion's body with a `cachePoint` where each breakpoint falls (the same body when there are none)."""
    payload = conversion.payload
    if not breakpoints:
        return payload
    state = payload["conversationState"]
    history: list[ChatMessage] = list(state.get("history", ()))
    current: dict[str, Any] = dict(state["currentMessage"]["userInputMessage"])
    marked: set[int] = set()  # history positions; -1 is the current message
    if breakpoints.system and request.system and history:
        marked.add(0)  # the context pair's user message holds the system prompt
    message_slots = _message_slots(conversion)
    for message_index, _ in breakpoints.messages:
        slot = message_slots.get(message_index)
        if slot is not None:
            marked.add(slot)
    for position in sorted(marked):
        if position == -1:
            current["cachePoint"] = dict(CACHE_POINT)
        elif 0 <= position < len(history):
            history[position] = _marked(history[position])
    context: dict[str, Any] | None = current.get("userInputMessageContext")
    if breakpoints.tools and context and context.get("tools"):
        current["userInputMessageContext"] = {
            **context,
            "tools": _tools_with_points(context["tools"], request, breakpoints, conversion),
        }
    new_state: dict[str, Any] = {**state, "currentMessage": {"userInputMessage": current}}
    if history:
        new_state["history"] = history
    return cast(GenerateAssistantResponseRequest, {**payload, "conversationState": new_state})


def _message_slots(conversion: Conversion) -> dict[int, int]:
    """Claude message index → the history position of the Amazon Q message it went into (-1: current)."""
    slots: dict[int, int] = {}
    last = len(conversion.turn_messages) - 1
    for position, indices in enumerate(conversion.turn_messages):
        slot = -1 if position == last else conversion.turns_at + position
        for index in indices:
            slots[index] = slot
    return slots


def _marked(message: ChatMessage) -> ChatMessage:
    if "userInputMessage" in message:
        return {"userInputMessage": {**message["userInputMessage"], "cachePoint": dict(CACHE_POINT)}}  # type: ignore[typeddict-item]
    return {"assistantResponseMessage": {**message["assistantResponseMessage"], "cachePoint": dict(CACHE_POINT)}}  # type: ignore[typeddict-item]


def _tools_with_points(
    tools: list[Any], request: MessagesRequest, breakpoints: CacheBreakpoints, conversion: Conversion
) -> list[Any]:
    """`tools` with a cachePoint element after the spec of each marked tool (found by its name)."""
    client_names = {
        (request.tools or [])[index].name for index in breakpoints.tools if index < len(request.tools or [])
    }
    out: list[Any] = []
    for tool in tools:
        out.append(tool)
        spec = tool.get("toolSpecification")
        if spec is not None and conversion.tool_names.get(spec["name"], spec["name"]) in client_names:
            out.append({"cachePoint": dict(CACHE_POINT)})
    return out
