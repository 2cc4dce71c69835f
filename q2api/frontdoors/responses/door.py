"""`POST /v1/responses`: the OpenAI Responses front door on the shared relay.

The body is parsed as a Responses request (q2api.openai.responses_types), translated — after the
conversation it continues, which the server loads from the store — to the Claude request
(q2api.frontdoors.responses.request), and from there runs the very pipeline of `/v1/messages`.
The Claude events come back as the Responses stream or the `response` object
(q2api.frontdoors.responses.reply); the finished response is the non-streaming answer, and the
stream encoder's `answer()`, which the relay hands to the door's `after` hook (the server stores
it there: q2api.server.responses_routes). Every error leaves in the OpenAI envelope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from loguru import logger

from q2api.anthropic.cache_control import NO_BREAKPOINTS, CacheBreakpoints
from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.anthropic.events import StreamEvent
from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep
from q2api.anthropic.types import MessagesRequest
from q2api.frontdoors.claude.output_check import ClaudeReplyCheck, strict_tools_check
from q2api.frontdoors.door import ErrorReply, EventEncoder
from q2api.frontdoors.field_table import report_unknown_fields
from q2api.frontdoors.json_numbers import refuse_unwritable_integer_openai
from q2api.frontdoors.openai_shared import ChatError, HeldResponseCheck, client_error_of, held_check, openai_error
from q2api.frontdoors.responses.conversation_key import ConversationKey
from q2api.frontdoors.responses.framing import SSE, Framing
from q2api.frontdoors.responses.message_events import claude_events_of
from q2api.frontdoors.responses.reply import ResponseBuilder, ResponseFrame
from q2api.frontdoors.responses.request import TranslatedResponses, claude_request, new_id
from q2api.frontdoors.session_key import DoorSession
from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.openai.responses_types import ResponsesRequest
from q2api.openai.responses_types import read_responses_request as parse_with_unknown_fields

RESPONSES_ROUTE = "/v1/responses"


def _report(problem: str) -> None:
    logger.warning(f"response: {problem}")


def read_responses_request(body: bytes) -> ResponsesRequest:
    """The body as a Responses request; a bad one raises the door's 400. Top-level fields no type
    declares are taken out and named in the log (q2api.frontdoors.field_table)."""
    try:
        parsed, unknown = parse_with_unknown_fields(body)
        refuse_unwritable_integer_openai(body)
        refuse_too_deep(parsed)
    except OpenAIError as error:
        raise ChatError(error) from None
    report_unknown_fields(unknown)
    return parsed


# The request's free-form JSON: what the Responses store writes with orjson (the input items, the tools)
# and what the door passes on. A web_search_call item's `action` 584 levels deep was accepted, answered,
# then failed to be stored: a 500 after the upstream call, the credits spent and the answer lost.
_FREE_FORM_FIELDS = (
    "input",
    "tools",
    "tool_choice",
    "conversation",
    "prompt",
    "background_options",
    "context_management",
)


def refuse_too_deep(parsed: ResponsesRequest) -> None:
    """InvalidChatRequest naming the first free-form field (or its item) nested past MAX_JSON_DEPTH."""
    for name in _FREE_FORM_FIELDS:
        value = getattr(parsed, name)
        if isinstance(value, list):
            index = first_too_deep(value)
            if index is not None:
                item = value[index]
                # A tool's schema is the usual culprit: named as the tool translation names it.
                nested = (
                    "parameters"
                    if isinstance(item, dict) and first_too_deep([item.get("parameters")]) is not None
                    else None
                )
                raise InvalidChatRequest(f"{name}[{index}]" + (f".{nested}" if nested else ""), TOO_DEEP)
        elif isinstance(value, dict) and first_too_deep([value]) is not None:
            raise InvalidChatRequest(name, TOO_DEEP)


def echoed_settings(responses: ResponsesRequest) -> dict[str, Any]:
    """What a `response` object repeats of the request that made it, with the API's defaults."""
    reasoning = responses.reasoning
    text_format = responses.text.format if responses.text and responses.text.format else None
    return {
        "instructions": responses.instructions,
        "max_output_tokens": responses.max_output_tokens,
        "metadata": responses.metadata or {},
        "parallel_tool_calls": responses.parallel_tool_calls is not False,
        "previous_response_id": responses.previous_response_id,
        "reasoning": {
            "effort": reasoning.effort if reasoning else None,
            "summary": (reasoning.summary or reasoning.generate_summary) if reasoning else None,
        },
        "store": responses.store is not False,
        "temperature": 1.0 if responses.temperature is None else responses.temperature,
        "text": {"format": msgspec.to_builtins(text_format) if text_format else {"type": "text"}},
        "tool_choice": responses.tool_choice if responses.tool_choice is not None else "auto",
        "tools": responses.tools or [],
        "top_p": 1.0 if responses.top_p is None else responses.top_p,
        "truncation": responses.truncation or "disabled",
    }


@dataclass(slots=True)
class ResponsesCall:
    parsed: ResponsesRequest  # the request as read (its `store`, `previous_response_id`)
    translated: TranslatedResponses
    frame: ResponseFrame
    framing: Framing = SSE  # how the stream's events are written (the WebSocket transport writes lines)
    # The conversation the client says this turn belongs to (Codex's session-id / thread-id /
    # prompt_cache_key): what session affinity keys on (conversation_key.py).
    conversation_key: ConversationKey | None = None
    # The first response of the stored chain this turn belongs to (itself, for a turn that starts one).
    chain_root: str | None = None
    strict_tools: ClaudeReplyCheck | None = None  # the calls of `strict` function tools, checked

    @property
    def request(self) -> MessagesRequest:
        return self.translated.request

    @property
    def session(self) -> DoorSession:
        return DoorSession(codex=self.conversation_key, chain_root=self.chain_root)

    def claude_document(self) -> Any:
        return msgspec.to_builtins(self.translated.request)

    def cache_breakpoints(self) -> CacheBreakpoints:
        # Responses requests carry no breakpoints (OpenAI caches prefixes by itself); the cached
        # tokens Amazon Q reports still reach `usage.input_tokens_details.cached_tokens`.
        return NO_BREAKPOINTS

    def encoder(self) -> EventEncoder:
        return ResponsesEncoder(self, ResponseBuilder(self.frame, self.translated.options, report=_report))

    def answer(self, message: dict[str, Any]) -> object:
        builder = ResponseBuilder(self.frame, self.translated.options, report=_report)
        builder.add_all(claude_events_of(message))
        final = builder.final
        assert final is not None  # the played stream always ends
        if builder.refusal is not None:  # the reply failed `text.format`: an error, never passed off as valid
            raise ChatError(builder.refusal)
        return final

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


class ResponsesEncoder:
    """Claude stream events → the Responses stream in its call's framing (an EventEncoder); its
    `answer()` is the finished response."""

    def __init__(self, call: ResponsesCall, builder: ResponseBuilder) -> None:
        self._call = call
        self._builder = builder
        self.ping = call.framing.ping

    def encode(self, events: Sequence[StreamEvent]) -> bytes:
        return self._call.framing.frame(self._builder.add_all(events))

    def trailer(self) -> bytes:
        return b""  # the terminal event (`response.completed`, …) is the end; no `[DONE]`

    def answer(self) -> dict[str, Any] | None:
        final = self._builder.final
        return final if final is not None and final["status"] != "failed" else None


class ResponsesDoor:
    """One Responses request: `parsed` (the edge read it to find the conversation) and the stored
    items of the conversation it continues, oldest first; `framing` and `conversation_key` are
    handed to the call (the transport and the headers are the server's to read). `generate` False:
    a turn read to be prepared, not answered (the WebSocket's `generate: false`).

    Without `parsed`, the door reads a body on its own (`RESPONSES_DOOR`: refusals at the edge,
    replays of a capture): one that continues a stored conversation is refused, since only the
    door's `before` hook (q2api.server.doors) can load that conversation. The door keeps nothing of
    a request it read: each read is a new call with a new response id unless one was given."""

    route = RESPONSES_ROUTE

    def __init__(
        self,
        parsed: ResponsesRequest | None = None,
        history: Sequence[dict[str, Any]] = (),
        *,
        previous_model: str | None = None,
        response_id: str | None = None,
        chain_root: str | None = None,
        framing: Framing = SSE,
        conversation_key: ConversationKey | None = None,
        generate: bool = True,
    ) -> None:
        self._parsed = parsed
        self._generate = generate
        self.history = history
        self._previous_model = previous_model
        self._framing = framing
        self._conversation_key = conversation_key
        self._response_id = response_id
        self._chain_root = chain_root  # the first response of the chain a continued conversation began with

    @property
    def parsed(self) -> ResponsesRequest | None:
        """The request as the edge read it (None: `read` parses the body itself)."""
        return self._parsed

    def read(self, body: bytes) -> ResponsesCall:
        parsed = self._parsed if self._parsed is not None else _read_on_its_own(body)
        try:
            translated = claude_request(
                parsed, self.history, previous_model=self._previous_model, generate=self._generate
            )
        except OpenAIError as error:
            raise ChatError(error) from None
        frame = ResponseFrame(self._response_id or new_id("resp"), translated.request.model, echoed_settings(parsed))
        try:
            strict_tools = strict_tools_check(translated.request)
        except InvalidRequest as error:  # a strict tool's schema that cannot be checked
            raise client_error_of(error, translated.param_for) from None
        # A turn that continues nothing starts a chain when it can be continued (stored, or on a WebSocket,
        # which remembers its last response); session affinity then keys the chain on this turn's id.
        continuable = parsed.store is not False or self._framing is not SSE
        chain_root = self._chain_root or (frame.response_id if continuable else None)
        return ResponsesCall(
            parsed,
            translated,
            frame,
            self._framing,
            self._conversation_key,
            chain_root=chain_root,
            strict_tools=strict_tools,
        )

    def error_reply(self, error: AnthropicError, request_id: str | None) -> ErrorReply:
        return responses_error_reply(error)


def responses_error_reply(error: AnthropicError) -> ErrorReply:
    openai = openai_error(error)
    return ErrorReply(openai.status, openai.envelope(), openai.headers)


def _read_on_its_own(body: bytes) -> ResponsesRequest:
    """A body read with no conversation loaded: one that continues a stored conversation cannot be."""
    parsed = read_responses_request(body)
    if parsed.previous_response_id:
        raise ChatError(
            InvalidChatRequest(
                "previous_response_id",
                "the request continues a stored conversation, which only the gateway's store holds: "
                "it cannot be read on its own",
            )
        )
    return parsed


# The door as the server names it before a request has a door of its own (refusals at the edge,
# replays of a capture); a request's own is the one the door's `before` hook returns.
RESPONSES_DOOR = ResponsesDoor()
