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

_dumps = orjson.dumps
_SEPARATOR = b"\n\n"
_PREFIXES: dict[str, bytes] = {}


def _prefix(event_type: str) -> bytes:
    prefix = _PREFIXES.get(event_type)
    if prefix is None:
        if "\n" in event_type or "\r" in event_type:
            raise ValueError(f"SSE event type {event_type!r} contains a line break")
        prefix = _PREFIXES[event_type] = f"event: {event_type}\ndata: ".encode()
    return prefix


def encode_sse_event(event: Mapping[str, Any]) -> bytes:
    return _prefix(event["type"]) + _dumps(event) + _SEPARATOR


def encode_sse(events: Iterable[Mapping[str, Any]]) -> bytes:
    """Encode a batch of events into one chunk."""
    prefixes = _PREFIXES
    parts: list[bytes] = []
    append = parts.append
    for event in events:
        event_type = event["type"]
        prefix = prefixes.get(event_type)
        append(prefix if prefix is not None else _prefix(event_type))
        append(_dumps(event))
        append(_SEPARATOR)
    return b"".join(parts)


_PING_BYTES = encode_sse_event(PING_EVENT)


class SseEncoder:
    """Claude stream events as the Anthropic SDKs read them (the streaming endpoint's encoder)."""

    ping = _PING_BYTES

    def encode(self, events: Sequence[StreamEvent]) -> bytes:
        return encode_sse(events)

    def trailer(self) -> bytes:
        return b""
