"""Server-sent events as the Anthropic SDKs parse them (docs/protocol.md#server-sent-events).

Every event is an ``event:`` line naming its type (the SDK skips events
without one) and exactly one ``data:`` line of compact JSON (orjson never
emits a raw newline, so a value is never split across ``data:`` lines).
A batch of events becomes one bytes chunk: the app writes what one upstream
read produced in one write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from q2api.anthropic.events import StreamEvent

PING_EVENT: dict[str, str] = {"type": "ping"}


def encode_sse_event(event: Mapping[str, Any]) -> bytes:
    event_type: str = event["type"]
    if "\n" in event_type or "\r" in event_type:
        raise ValueError(f"SSE event type {event_type!r} contains a line break")
    return b"event: " + event_type.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def encode_sse(events: Iterable[Mapping[str, Any]]) -> bytes:
    """Encode a batch of events into one chunk."""
    return b"".join(map(encode_sse_event, events))


class SseEncoder:
    """Claude stream events as the Anthropic SDKs read them (the streaming endpoint's encoder)."""

    ping = encode_sse_event(PING_EVENT)

    def encode(self, events: Sequence[StreamEvent]) -> bytes:
        return encode_sse(events)

    def trailer(self) -> bytes:
        return b""

    def answer(self) -> None:
        return None  # the Claude door has no `after` hook
