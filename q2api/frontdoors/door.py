"""What a front door is: one client protocol on the one pipeline.

A door reads a body into a `DoorCall` — the Claude request it becomes, plus how to answer it
(the stream encoder, the JSON answer, the client's view of an error) — and writes its error
envelope as an `ErrorReply`, which the server sends. The Claude Messages door is native
(`q2api.frontdoors.claude`); the OpenAI Chat Completions door is `q2api.frontdoors.chat`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import ContextManagement, StreamEvent
from q2api.anthropic.reply_content import ReplyCheck
from q2api.anthropic.types import MessagesRequest

if TYPE_CHECKING:
    from q2api.frontdoors.claude.compaction import CompactionAsk
    from q2api.frontdoors.session_key import DoorSession


class EventEncoder(Protocol):
    """Claude stream events → the bytes one front door writes."""

    ping: bytes  # written while the upstream is silent (b"" = nothing)

    def encode(self, events: Sequence[StreamEvent]) -> bytes: ...

    def trailer(self) -> bytes:
        """Bytes after the last event (b"" = nothing)."""
        ...

    def answer(self) -> object | None:
        """The JSON body the stream amounts to once its last event is encoded, as a non-streaming
        request would get it (None: the door keeps none, or the reply failed); what a door's
        `after` hook is given (q2api.server.doors)."""
        ...


class DoorCall(Protocol):
    """One request as its door read it."""

    @property
    def request(self) -> MessagesRequest:
        """The Claude request the pipeline converts."""
        ...

    @property
    def session(self) -> DoorSession | None:
        """What the door knows of the conversation beyond the Claude request (session affinity's keys)."""
        ...

    def claude_document(self) -> Any:
        """The Claude request as JSON values, for the DEBUG reproducer."""
        ...

    def cache_breakpoints(self) -> CacheBreakpoints:
        """Where the client asked for prompt-cache breakpoints (Claude's `cache_control`)."""
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
        work whose cost the client chooses, which the server does off the event loop."""
        ...

    def client_error(self, error: AnthropicError) -> AnthropicError:
        """`error` as this request's client sees it (a door may rename fields or statuses)."""
        ...

    @property
    def reply_check(self) -> ReplyCheck | None:
        """What the reply must be (a schema), checked before the client sees it; None: anything."""
        ...

    @property
    def context_management(self) -> ContextManagement | None:
        """What the door's context editing did (the reply reports it); None: the request asked for none."""
        ...

    @property
    def compaction(self) -> CompactionAsk | None:
        """The reply summarises the conversation first (q2api.frontdoors.claude.compaction); None: it does not."""
        ...


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An error as one door's clients expect it: the server adds the request id header and sends it."""

    status: int
    envelope: object  # the JSON body
    headers: Mapping[str, str]


class FrontDoor(Protocol):
    route: str  # the path its requests' log lines name

    def read(self, body: bytes) -> DoorCall: ...

    def error_reply(self, error: AnthropicError, request_id: str | None) -> ErrorReply: ...
