"""How the Responses stream's events are written on the wire. Pure.

Over HTTP each event is SSE, `event: <type>` then its JSON (`SSE`); over the WebSocket each
event is one message (`json_lines`: one event's JSON per line, which the transport sends line by
line). A batch of events is framed at once: one write per upstream read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

Event = dict[str, Any]


def sse_bytes(events: Sequence[Event]) -> bytes:
    """Responses stream events as SSE: `event: <type>` and the JSON, as the API writes them."""
    return b"".join(
        b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n" for event in events
    )


@dataclass(frozen=True, slots=True)
class Framing:
    """How a reply's events are written on the wire: the bytes of a batch, and what a ping is."""

    frame: Callable[[Sequence[Event]], bytes]
    ping: bytes


SSE = Framing(sse_bytes, b": ping\n\n")  # an SSE comment: clients skip it, proxies see traffic


def json_lines(extra: dict[str, Any] | None = None) -> Framing:
    """One event's JSON per line (orjson writes no raw line break), each with `extra` fields: the
    WebSocket transport sends each line as one message. No pings: WebSocket pings its own way."""
    if not extra:
        return Framing(lambda events: b"".join(orjson.dumps(event) + b"\n" for event in events), b"")
    return Framing(lambda events: b"".join(orjson.dumps({**event, **extra}) + b"\n" for event in events), b"")
