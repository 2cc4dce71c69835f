"""Stream events → the non-streaming `Message` JSON (docs/protocol.md#the-message-json).

Non-streaming replies are built from the very same events the SSE path
sends, so both paths agree by construction. Accumulation follows the SDK's
own accumulator: blocks by index, text/thinking deltas appended, the
signature overwritten, tool input JSON joined and parsed when its block
stops, and `message_delta.usage` overwriting only the keys it carries.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any, assert_never

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import (
    ContentBlockDeltaEvent,
    ContentBlockStartEvent,
    ContentBlockStopEvent,
    ErrorEvent,
    MessageDeltaEvent,
    MessageStartEvent,
    StreamEvent,
)

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

    def add(self, event: StreamEvent) -> None:
        if self.state is AggregatorState.FAILED:
            return
        match event["type"]:
            case "content_block_delta":
                self._on_delta(event)
            case "content_block_start":
                self._on_block_start(event)
            case "content_block_stop":
                self._on_block_stop(event)
            case "message_start":
                self._on_message_start(event)
            case "message_delta":
                self._on_message_delta(event)
            case "message_stop":
                self.state = AggregatorState.COMPLETE
            case "error":
                self._on_error(event)
            case "ping":
                pass  # carries nothing for the message
            case unknown:
                assert_never(unknown)

    def add_all(self, events: Iterable[StreamEvent]) -> None:
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

    def _on_error(self, event: ErrorEvent) -> None:
        error_type = event["error"]["type"] or "api_error"
        self.error = AnthropicError(
            _STATUS_BY_ERROR_TYPE.get(error_type, 500),
            event["error"]["message"] or "the upstream reply failed",
            error_type=error_type,
        )
        self.state = AggregatorState.FAILED

    def _on_message_start(self, event: MessageStartEvent) -> None:
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

    def _on_block_start(self, event: ContentBlockStartEvent) -> None:
        block: dict[str, Any] = dict(event["content_block"])
        if block["type"] in ("tool_use", "server_tool_use"):
            block["input"] = dict(block["input"])
            self._tool_json[event["index"]] = []
        self._content.append(block)

    def _on_delta(self, event: ContentBlockDeltaEvent) -> None:
        index = event["index"]
        block = self._content[index]
        delta = event["delta"]
        if delta["type"] == "text_delta":
            block["text"] += delta["text"]
        elif delta["type"] == "thinking_delta":
            block["thinking"] += delta["thinking"]
        elif delta["type"] == "signature_delta":
            block["signature"] = delta["signature"]  # the SDK overwrites, too
        elif delta["type"] == "input_json_delta":
            self._tool_json[index].append(delta["partial_json"])
        elif delta["type"] == "citations_delta":
            block.setdefault("citations", None)
            block["citations"] = [*(block["citations"] or ()), delta["citation"]]  # as the SDK appends
        elif delta["type"] == "compaction_delta":
            block["content"] = delta["content"]  # the SDK sets it, too
        else:
            assert_never(delta)

    def _on_block_stop(self, event: ContentBlockStopEvent) -> None:
        index = event["index"]
        fragments = self._tool_json.pop(index, None)
        if fragments:
            text = "".join(fragments)
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise AnthropicError(500, "a tool call's input is not valid JSON") from None
            self._content[index]["input"] = value

    def _on_message_delta(self, event: MessageDeltaEvent) -> None:
        delta = event["delta"]
        self._message["stop_reason"] = delta["stop_reason"]
        self._message["stop_sequence"] = delta.get("stop_sequence")  # as tolerant as the SDK
        if "stop_details" in delta:
            self._message["stop_details"] = delta["stop_details"]
        if "context_management" in event:
            self._message["context_management"] = event["context_management"]
        usage = self._message["usage"]
        for key, value in event["usage"].items():
            if value is not None:
                usage[key] = value
