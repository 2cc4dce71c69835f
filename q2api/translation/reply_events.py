"""The Amazon Q reply events the translator reads (docs/protocol.md#event-types).

`ReplyEventType` names every event type that means something for the reply: the translator's
dispatch over it ends in `assert_never`, so a type added here and not handled there is a type error.
Any other type is counted and ignored (q2api.translation.translator). The types are the wire's own
strings: matching one costs a string comparison, where an enum member costs an attribute lookup on
a path taken once per upstream event.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import RefusalDetails
from q2api.translation.anomalies import AnomalyKind, StreamFinding
from q2api.translation.error_mapping import bad_payload

ReplyEventType = Literal[
    "assistantResponseEvent",  # reply text
    "reasoningContentEvent",  # native thinking: text, signature, redacted content
    "toolUseEvent",  # a fragment of a tool call's input, `stop: true` at its end
    "metadataEvent",  # token usage
    "contextUsageEvent",  # share of the context window used
    "meteringEvent",  # credits
    "invalidStateEvent",  # reported, never fatal
    "citationEvent",  # a citation of the reply text (web search)
]

# An `:event-type` header → the event type it names, if the reply reads it.
EVENT_TYPES: dict[object, ReplyEventType] = {name: name for name in get_args(ReplyEventType)}

# A `metadataEvent.stopReason` (docs/protocol.md#stop-reasons) → the Claude stop reason it means. The
# values are Bedrock's, the model service behind Amazon Q; the others end the reply as usual.
UPSTREAM_STOP_REASONS = {
    "guardrail_intervened": "refusal",
    "content_filtered": "refusal",
    "model_context_window_exceeded": "model_context_window_exceeded",
}
REFUSAL_EXPLANATION = "Amazon Q's content filter stopped the reply."
_loads = orjson.loads


def event_payload(kind: ReplyEventType, raw: bytes) -> dict[str, Any] | AnthropicError:
    """The JSON object an event carries, or the stream's failure when it carries none."""
    try:
        payload = _loads(raw) if raw else {}
    except orjson.JSONDecodeError as error:
        return bad_payload(kind, f"is not valid JSON ({error})")
    if type(payload) is not dict:
        return bad_payload(kind, "is not a JSON object")
    if len(payload) == 1 and type(payload.get(kind)) is dict:
        wrapped: dict[str, Any] = payload[kind]  # the `{"<eventName>": {...}}` wrapping some streams use
        return wrapped
    return payload


def upstream_ending(upstream_stop: str | None, *, context_full: bool) -> tuple[str, RefusalDetails | None]:
    """How a reply without tool calls ended, where Amazon Q says more than "it ended"
    (docs/protocol.md#stop-reasons): the stop reason, and a refusal's details."""
    reason = UPSTREAM_STOP_REASONS.get(upstream_stop or "")
    if reason == "refusal":
        return reason, {"type": "refusal", "category": None, "explanation": REFUSAL_EXPLANATION}
    if reason is not None:
        return reason, None
    return ("model_context_window_exceeded" if context_full else "end_turn"), None


def invalid_state_finding(payload: dict[str, Any]) -> StreamFinding:
    detail = {"reason": payload.get("reason"), "message": payload.get("message")}
    return StreamFinding(AnomalyKind.INVALID_STATE_EVENT, "Amazon Q reported an invalid state", detail)
