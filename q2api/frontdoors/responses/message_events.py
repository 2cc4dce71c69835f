"""An aggregated Claude message played back as the stream that would have built it, so that a
non-streaming Responses reply goes through the same builder as a stream (and both agree by construction)."""

from __future__ import annotations

from typing import Any

import orjson

from q2api.anthropic.events import StreamEvent


def claude_events_of(message: dict[str, Any]) -> list[StreamEvent]:
    """An aggregated Claude message as the stream that would have built it (one delta per block)."""
    started = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[Any] = [{"type": "message_start", "message": started}]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            events.append(
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}
            )
            for citation in block.get("citations") or ():
                delta = {"type": "citations_delta", "citation": citation}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", "index": index, "content_block": empty})
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
            if block.get("signature"):
                signature = {"type": "signature_delta", "signature": block["signature"]}
                events.append({"type": "content_block_delta", "index": index, "delta": signature})
        elif kind in ("tool_use", "server_tool_use"):
            start = {**block, "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": stop, "usage": message["usage"]})
    events.append({"type": "message_stop"})
    return events
