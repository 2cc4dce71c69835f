"""The Amazon Q reply events the translator reads (docs/protocol.md#event-types), and each one's payload.

`EVENT_KINDS` names every event type that means something for the reply; any other type is counted
and ignored (q2api.translation.translator). A payload is a JSON object, sometimes wrapped as
`{"<eventName>": {...}}`; one that is not JSON, or not an object, fails the reply
(q2api.translation.error_mapping.bad_payload).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.translation.anomalies import AnomalyKind, StreamFinding
from q2api.translation.error_mapping import bad_payload


class ReplyEvent(Enum):
    ASSISTANT_RESPONSE = "assistantResponseEvent"  # reply text
    REASONING = "reasoningContentEvent"  # native thinking: text, signature, redacted content
    TOOL_USE = "toolUseEvent"  # a fragment of a tool call's input, `stop: true` at its end
    METADATA = "metadataEvent"  # token usage
    CONTEXT_USAGE = "contextUsageEvent"  # share of the context window used
    METERING = "meteringEvent"  # credits
    INVALID_STATE = "invalidStateEvent"  # reported, never fatal
    CITATION = "citationEvent"  # a citation of the reply text (web search)


EVENT_KINDS: dict[object, ReplyEvent] = {kind.value: kind for kind in ReplyEvent}

_loads = orjson.loads


def read_payload(event_type: str, raw: bytes) -> dict[str, Any] | AnthropicError:
    """The event's payload as an object (unwrapped), or why it cannot be read."""
    try:
        payload = _loads(raw) if raw else {}
    except orjson.JSONDecodeError as error:
        return bad_payload(event_type, f"is not valid JSON ({error})")
    if type(payload) is not dict:
        return bad_payload(event_type, "is not a JSON object")
    if len(payload) == 1 and type(payload.get(event_type)) is dict:
        payload = payload[event_type]  # the `{"<eventName>": {...}}` wrapping some streams use
    return payload


def invalid_state_finding(payload: dict[str, Any]) -> StreamFinding:
    detail = {"reason": payload.get("reason"), "message": payload.get("message")}
    return StreamFinding(AnomalyKind.INVALID_STATE_EVENT, "Amazon Q reported an invalid state", detail)
