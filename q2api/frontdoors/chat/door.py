"""`POST /v1/chat/completions`: the OpenAI front door on the shared relay.

The body is parsed as an OpenAI request (q2api.openai.types), translated to the Claude
request (q2api.frontdoors.chat.request), and from there runs the very pipeline of
`/v1/messages` — guards, conversion, account pool, retries, the reply — before the Claude
events are rendered as OpenAI chunks or a `chat.completion` (q2api.frontdoors.chat.reply).
Every error, the door's own and the pipeline's, leaves in the OpenAI envelope.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
from loguru import logger

from q2api.anthropic.cache_control import NO_BREAKPOINTS, CacheBreakpoints
from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.anthropic.types import MessagesRequest
from q2api.frontdoors.chat.fields import refused_tag
from q2api.frontdoors.chat.reply import ChatChunkEncoder, chat_completion
from q2api.frontdoors.chat.request import TranslatedRequest, claude_request
from q2api.frontdoors.claude.output_check import ClaudeReplyCheck, strict_tools_check
from q2api.frontdoors.door import ErrorReply, EventEncoder
from q2api.frontdoors.field_table import report_unknown_fields
from q2api.frontdoors.json_numbers import refuse_unwritable_integer_openai
from q2api.frontdoors.openai_shared import ChatError, HeldResponseCheck, client_error_of, held_check, openai_error
from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.openai.types import read_chat_request

CHAT_ROUTE = "/v1/chat/completions"


def _report(problem: str) -> None:
    logger.warning(f"chat completion: {problem}")


@dataclass(frozen=True, slots=True)
class ChatCall:
    translated: TranslatedRequest
    created: int = field(default_factory=lambda: int(time.time()))
    strict_tools: ClaudeReplyCheck | None = None  # the calls of `strict` function tools, checked
    session: None = None  # the headers and the request say it all (q2api.frontdoors.session_key)

    @property
    def request(self) -> MessagesRequest:
        return self.translated.request

    def claude_document(self) -> Any:
        return msgspec.to_builtins(self.translated.request)

    def cache_breakpoints(self) -> CacheBreakpoints:
        # OpenAI requests carry no breakpoints (OpenAI caches prefixes by itself); the cached
        # tokens Amazon Q reports still reach `prompt_tokens_details.cached_tokens`.
        return NO_BREAKPOINTS

    def encoder(self) -> EventEncoder:
        return ChatChunkEncoder(self.translated.options, created=self.created, report=_report)

    def answer(self, message: dict[str, Any]) -> object:
        return chat_completion(message, self.translated.options, created=self.created, report=_report)

    @property
    def checks_reply(self) -> bool:
        return self.translated.options.check is not None

    def client_error(self, error: AnthropicError) -> AnthropicError:
        return client_error_of(error, self.translated.param_for)

    @property
    def reply_check(self) -> HeldResponseCheck | None:
        return held_check(self.translated.options.check, self.strict_tools)

    @property
    def context_management(self) -> None:
        return None  # an OpenAI request asks for no context editing

    @property
    def compaction(self) -> None:
        return None


class ChatDoor:
    route = CHAT_ROUTE

    def read(self, body: bytes) -> ChatCall:
        try:
            parsed, unknown = read_chat_request(body)
            refuse_unwritable_integer_openai(body)
            report_unknown_fields(unknown)
            translated = claude_request(parsed)
        except InvalidChatRequest as error:
            raise ChatError(refused_tag(error) or error) from None
        except OpenAIError as error:
            raise ChatError(error) from None
        try:
            return ChatCall(translated, strict_tools=strict_tools_check(translated.request))
        except InvalidRequest as error:  # a strict tool's schema that cannot be checked
            raise client_error_of(error, translated.param_for) from None

    def error_reply(self, error: AnthropicError, request_id: str | None) -> ErrorReply:
        openai = openai_error(error)
        return ErrorReply(openai.status, openai.envelope(), openai.headers)


CHAT_DOOR = ChatDoor()
