"""The Amazon Q reply events the translator reads (docs/protocol.md#event-types).

`ReplyEventType` names every event type that means something for the reply: the translator's
dispatch over it ends in `assert_never`, so a type added here and not handled there is a type error.
Any other type is counted and ignored (q2api.translation.translator). The types are the wire's own
strings: matching one costs a string comparison, where an enum member costs an attribute lookup on
a path taken once per upstream event.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from q2api.translation.anomalies import AnomalyKind, StreamFinding

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


def invalid_state_finding(payload: dict[str, Any]) -> StreamFinding:
    detail = {"reason": payload.get("reason"), "message": payload.get("message")}
    return StreamFinding(AnomalyKind.INVALID_STATE_EVENT, "Amazon Q reported an invalid state", detail)
