"""The Claude stream events, typed once (docs/protocol.md#event-sequence).

Plain dicts at run time — what `orjson.dumps` writes is exactly what the SDKs
parse — and TypedDicts for the type checker, so a misspelt key or a missing
`usage` is an error before it is a broken stream. The translator builds them,
the SSE encoder and the message aggregator read them, and dispatch over
`StreamEvent` ends in `assert_never`, so a new kind of event cannot be
forgotten.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# ---------------------------------------------------------------------- usage


class ServerToolUsage(TypedDict):
    web_search_requests: int
    web_fetch_requests: int


class IterationUsage(TypedDict):
    """One sampling of a reply that took several (a compaction's summary, then the message)."""

    type: Literal["compaction", "message"]
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class Usage(TypedDict, total=False):
    """Cumulative token counts; `input_tokens` and `output_tokens` are always present on the wire."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    server_tool_use: ServerToolUsage  # present when the request offered a server tool
    # Present when the reply compacted the conversation: the top-level counts are the message's alone.
    iterations: list[IterationUsage]


# ---------------------------------------------------------------------- content blocks


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ServerToolUseBlock(TypedDict):
    """A call the gateway ran for the model (web search); its input follows as `input_json_delta`."""

    type: Literal["server_tool_use"]
    id: str  # srvtoolu_…
    name: str
    input: dict[str, Any]


class WebSearchResult(TypedDict):
    type: Literal["web_search_result"]
    title: str
    url: str
    page_age: str | None


class WebSearchToolResultError(TypedDict):
    type: Literal["web_search_tool_result_error"]
    error_code: str  # invalid_tool_input, unavailable, max_uses_exceeded, too_many_requests, query_too_long


class WebSearchToolResultBlock(TypedDict):
    type: Literal["web_search_tool_result"]
    tool_use_id: str
    content: list[WebSearchResult] | WebSearchToolResultError


class CompactionBlock(TypedDict):
    """A summary of the conversation so far (context management's compaction); its text comes as a `compaction_delta`."""

    type: Literal["compaction"]
    content: str | None


ContentBlock = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | WebSearchToolResultBlock
    | CompactionBlock
)


class TextDelta(TypedDict):
    type: Literal["text_delta"]
    text: str


class ThinkingDelta(TypedDict):
    type: Literal["thinking_delta"]
    thinking: str


class SignatureDelta(TypedDict):
    type: Literal["signature_delta"]
    signature: str


class InputJsonDelta(TypedDict):
    type: Literal["input_json_delta"]
    partial_json: str


class CitationsDelta(TypedDict):
    type: Literal["citations_delta"]
    citation: dict[str, Any]  # e.g. {"type": "web_search_result_location", "url", "title", "cited_text"}


class CompactionDelta(TypedDict):
    type: Literal["compaction_delta"]
    content: str | None  # None: the summary could not be made


BlockDelta = TextDelta | ThinkingDelta | SignatureDelta | InputJsonDelta | CitationsDelta | CompactionDelta

# ---------------------------------------------------------------------- the message


class StartedMessage(TypedDict):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: Usage


class RefusalDetails(TypedDict):
    type: Literal["refusal"]
    category: str | None
    explanation: str | None


class StopDelta(TypedDict):
    stop_reason: str
    stop_sequence: str | None
    stop_details: NotRequired[RefusalDetails]  # with `stop_reason: refusal`


class ErrorBody(TypedDict):
    type: str  # the Anthropic error type, e.g. "overloaded_error"
    message: str


# ---------------------------------------------------------------------- the events


class MessageStartEvent(TypedDict):
    type: Literal["message_start"]
    message: StartedMessage


class ContentBlockStartEvent(TypedDict):
    type: Literal["content_block_start"]
    index: int
    content_block: ContentBlock


class ContentBlockDeltaEvent(TypedDict):
    type: Literal["content_block_delta"]
    index: int
    delta: BlockDelta


class ContentBlockStopEvent(TypedDict):
    type: Literal["content_block_stop"]
    index: int


class ContextManagement(TypedDict):
    applied_edits: list[dict[str, Any]]  # {"type", "cleared_…", "cleared_input_tokens"}


class MessageDeltaEvent(TypedDict):
    type: Literal["message_delta"]
    delta: StopDelta
    usage: Usage
    context_management: NotRequired[ContextManagement]  # when the request asked for context management


class MessageStopEvent(TypedDict):
    type: Literal["message_stop"]


class PingEvent(TypedDict):
    type: Literal["ping"]


class ErrorEvent(TypedDict):
    type: Literal["error"]
    error: ErrorBody
    request_id: NotRequired[str]


StreamEvent = (
    MessageStartEvent
    | ContentBlockStartEvent
    | ContentBlockDeltaEvent
    | ContentBlockStopEvent
    | MessageDeltaEvent
    | MessageStopEvent
    | PingEvent
    | ErrorEvent
)


def error_event(error_type: str, message: str) -> ErrorEvent:
    return {"type": "error", "error": {"type": error_type, "message": message}}
