"""`POST /v1/messages`: the Anthropic Messages API, the pipeline's own language (identity on both sides)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.sse import SseEncoder
from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.frontdoors.door import ErrorReply, EventEncoder

CLAUDE_SSE = SseEncoder()


@dataclass(frozen=True, slots=True)
class ClaudeCall:
    request: MessagesRequest
    body: bytes

    def claude_document(self) -> Any:
        return orjson.loads(self.body)

    def encoder(self) -> EventEncoder:
        return CLAUDE_SSE

    def answer(self, message: dict[str, Any]) -> object:
        return message

    @property
    def checks_reply(self) -> bool:
        return False

    def client_error(self, error: AnthropicError) -> AnthropicError:
        return error


class ClaudeDoor:
    """`POST /v1/messages`: the Anthropic Messages API, the pipeline's own language."""

    route = "/v1/messages"

    def read(self, body: bytes) -> ClaudeCall:
        return ClaudeCall(parse_messages_request(body), body)

    def error_reply(self, error: AnthropicError, request_id: str | None) -> ErrorReply:
        return ErrorReply(error.status, error.envelope(request_id), error.headers)


CLAUDE_DOOR = ClaudeDoor()
