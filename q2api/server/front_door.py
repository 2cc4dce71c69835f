"""Front doors: one client protocol each, on the one pipeline of `MessagesRelay`.

A door reads a body into a `DoorCall` — the Claude request it becomes, plus how to answer
it (the stream encoder, the JSON answer, the client's view of an error) — and renders the
door's error envelope. The Claude Messages door is native (identity on both sides); the
OpenAI Chat Completions door is q2api.server.chat_completions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.responses import Response

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.sse import SseEncoder
from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.server.edge import error_response
from q2api.server.streaming import EventEncoder


class DoorCall(Protocol):
    """One request as its door read it."""

    @property
    def request(self) -> MessagesRequest:
        """The Claude request the pipeline converts."""
        ...

    def claude_document(self) -> Any:
        """The Claude request as JSON values, for the DEBUG reproducer."""
        ...

    def encoder(self) -> EventEncoder:
        """Claude stream events → this door's stream bytes (one encoder per streamed request)."""
        ...

    def answer(self, message: dict[str, Any]) -> object:
        """The JSON body of a non-streaming reply, from the aggregated Claude message."""
        ...

    @property
    def checks_reply(self) -> bool:
        """True when answering, or ending the stream, checks the whole reply (against a client's schema):
        work whose cost the client chooses, done off the event loop."""
        ...

    def client_error(self, error: AnthropicError) -> AnthropicError:
        """`error` as this request's client sees it (a door may rename fields or statuses)."""
        ...


class FrontDoor(Protocol):
    route: str  # the path its requests' log lines name

    def read(self, body: bytes) -> DoorCall: ...

    def error_response(self, error: AnthropicError, request_id: str | None) -> Response: ...


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

    def error_response(self, error: AnthropicError, request_id: str | None) -> Response:
        return error_response(error, request_id)


CLAUDE_DOOR = ClaudeDoor()
