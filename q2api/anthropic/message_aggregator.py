"""Stream events → the non-streaming `Message` JSON (PROTOCOL.md D5).

Non-streaming replies are built from the very same events the SSE path
sends, so both paths agree by construction. Accumulation follows the SDK's
own accumulator: blocks by index, text/thinking deltas appended, the
signature overwritten, tool input JSON joined and parsed when its block
stops, and `message_delta.usage` overwriting only the keys it carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

import orjson

from q2api.anthropic.errors import AnthropicError

# `error.type` → HTTP status, to rebuild an AnthropicError from an `error` event.
_STATUS_BY_ERROR_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AggregatorState(Enum):
    WAITING = "waiting"  # no message_start yet
    OPEN = "open"
    COMPLETE = "complete"  # message_stop seen
    FAILED = "failed"  # an error event arrived


class MessageAggregator:
    def __init__(self) -> None:
        self.state = AggregatorState.WAITING
        self.error: AnthropicError | None = None
        self._message: dict[str, Any] = {}
        self._content: list[dict[str, Any]] = []
        self._tool_json: dict[int, list[str]] = {}

    def add(self, event: Mapping[str, Any]) -> None:
        if self.state is AggregatorState.FAILED:
            return
        kind = event["type"]
        if kind == "content_block_delta":
            self._on_delta(event)
        elif kind == "content_block_start":
            self._on_block_start(event)
        elif kind == "content_block_stop":
            self._on_block_stop(event)
        elif kind == "message_start":
            self._on_message_start(event)
        elif kind == "message_delta":
            self._on_message_delta(event)
        elif kind == "message_stop":
            self.state = AggregatorState.COMPLETE
        elif kind == "error":
            error = event.get("error") or {}
            error_type = error.get("type") or "api_error"
            self.error = AnthropicError(
                _STATUS_BY_ERROR_TYPE.get(error_type, 500),
                error.get("message") or "the upstream reply failed",
                error_type=error_type,
            )
            self.state = AggregatorState.FAILED
        # ping and unknown events carry nothing for the message

    def add_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            self.add(event)

    def message(self) -> dict[str, Any]:
        """The final Message; raises the stream's AnthropicError if it failed or did not finish."""
        if self.error is not None:
            raise self.error
        if self.state is not AggregatorState.COMPLETE:
            raise AnthropicError(500, "the upstream reply ended before it was complete", error_type="api_error")
        return self._message

    # ------------------------------------------------------------------ events

    def _on_message_start(self, event: Mapping[str, Any]) -> None:
        started = event["message"]
        self._message = {
            "id": started["id"],
            "type": "message",
            "role": started.get("role", "assistant"),
            "model": started["model"],
            "content": self._content,
            "stop_reason": started.get("stop_reason"),
            "stop_sequence": started.get("stop_sequence"),
            "usage": dict(started["usage"]),
        }
        self.state = AggregatorState.OPEN

    def _on_block_start(self, event: Mapping[str, Any]) -> None:
        block = dict(event["content_block"])
        if block["type"] == "tool_use":
            block["input"] = dict(block.get("input") or {})
            self._tool_json[event["index"]] = []
        self._content.append(block)

    def _on_delta(self, event: Mapping[str, Any]) -> None:
        index = event["index"]
        block = self._content[index]
        delta = event["delta"]
        kind = delta["type"]
        if kind == "text_delta":
            block["text"] += delta["text"]
        elif kind == "thinking_delta":
            block["thinking"] += delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]
        elif kind == "input_json_delta":
            self._tool_json[index].append(delta["partial_json"])
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta["citation"])

    def _on_block_stop(self, event: Mapping[str, Any]) -> None:
        index = event["index"]
        fragments = self._tool_json.pop(index, None)
        if fragments:
            text = "".join(fragments)
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise AnthropicError(500, "a tool call's input is not valid JSON") from None
            self._content[index]["input"] = value

    def _on_message_delta(self, event: Mapping[str, Any]) -> None:
        delta = event.get("delta") or {}
        self._message["stop_reason"] = delta.get("stop_reason")
        self._message["stop_sequence"] = delta.get("stop_sequence")
        usage = self._message["usage"]
        for key, value in (event.get("usage") or {}).items():
            if value is not None:
                usage[key] = value
