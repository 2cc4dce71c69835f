"""`POST /v1/messages`: the Anthropic Messages API, the pipeline's own language (identity on both sides).

Reading a request (`ClaudeDoor.read`), in order: the body parsed, refused where the field table
refuses, and rid of Claude Code's billing line (q2api.frontdoors.claude.reading); system messages'
own fields (`system_messages`); the conversation read back from its last compaction block, and a
compaction due now (`compaction`); context editing (`context_editing`); the reply check of a format
or strict tools, with the format's instruction (`output_check`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import ContextManagement
from q2api.anthropic.sse import SseEncoder
from q2api.anthropic.types import MessagesRequest
from q2api.frontdoors.claude.compaction import CompactionAsk, compaction_due, read_back
from q2api.frontdoors.claude.context_editing import apply_context_edits
from q2api.frontdoors.claude.output_check import ClaudeReplyCheck, reply_check
from q2api.frontdoors.claude.reading import read_claude_request
from q2api.frontdoors.claude.system_messages import with_system_message_fields
from q2api.frontdoors.door import ErrorReply, EventEncoder

CLAUDE_SSE = SseEncoder()


@dataclass(frozen=True, slots=True)
class ClaudeCall:
    request: MessagesRequest
    breakpoints: CacheBreakpoints
    body: bytes
    context_management: ContextManagement | None = None
    compaction: CompactionAsk | None = None
    reply_check: ClaudeReplyCheck | None = None
    session: None = None  # the headers and the request say it all (q2api.frontdoors.session_key)

    def claude_document(self) -> Any:
        return orjson.loads(self.body)

    def cache_breakpoints(self) -> CacheBreakpoints:
        return self.breakpoints

    def encoder(self) -> EventEncoder:
        return CLAUDE_SSE

    def answer(self, message: dict[str, Any]) -> object:
        return message

    @property
    def checks_reply(self) -> bool:
        return False  # the reply's check runs before its events reach the door (q2api.translation.held_reply)

    def client_error(self, error: AnthropicError) -> AnthropicError:
        return error


class ClaudeDoor:
    """`POST /v1/messages`: the Anthropic Messages API, the pipeline's own language."""

    route = "/v1/messages"

    def read(self, body: bytes) -> ClaudeCall:
        request, breakpoints = read_claude_request(body)
        request = with_system_message_fields(request)
        request, breakpoints = read_back(request, breakpoints)
        request, applied = apply_context_edits(request)
        compaction = compaction_due(request)
        request, check = reply_check(request)
        management: ContextManagement | None = (
            {"applied_edits": list(applied)} if request.context_management is not None else None
        )
        return ClaudeCall(request, breakpoints, body, management, compaction, check)

    def error_reply(self, error: AnthropicError, request_id: str | None) -> ErrorReply:
        return ErrorReply(error.status, error.envelope(request_id), error.headers)


CLAUDE_DOOR = ClaudeDoor()
