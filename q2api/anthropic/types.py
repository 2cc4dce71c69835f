"""Claude Messages API request types, validated at the edge with msgspec.

Decoding is strict about what the gateway relies on (required fields, types,
block shapes) and lenient about everything else: unknown or newer top-level
fields and block fields (`output_config`, `context_management`, `speed`,
`container`, `cache_control`, …) are accepted and ignored, and `null` is
accepted wherever a field is optional.

`parse_messages_request` / `parse_count_tokens_request` turn a raw body into
typed values or raise :class:`InvalidRequest` naming the JSON path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from q2api.anthropic.cache_control import MAX_BREAKPOINTS, NO_BREAKPOINTS, CacheBreakpoints
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep

JSONObject = dict[str, Any]


class _Block(Struct, tag_field="type", kw_only=True):
    """Base of every content block; `type` is the tag.

    `cache_control` is read once, right after parsing, into the request's breakpoints, and then
    cleared (q2api.anthropic.types.parse_messages_request_with_breakpoints): Claude Code moves its cache
    breakpoint to the newest message on every turn, and a block that differs only by it must be
    the same block to the converter, which resumes a conversation where its messages are equal
    (q2api.conversion.checkpoints)."""

    cache_control: JSONObject | None = None


# ---------------------------------------------------------------- sources


class Base64ImageSource(Struct, tag_field="type", tag="base64"):
    media_type: str
    data: str


class URLImageSource(Struct, tag_field="type", tag="url"):
    url: str


class FileImageSource(Struct, tag_field="type", tag="file"):
    file_id: str


ImageSource = Base64ImageSource | URLImageSource | FileImageSource


class Base64DocumentSource(Struct, tag_field="type", tag="base64"):
    media_type: str
    data: str


class PlainTextDocumentSource(Struct, tag_field="type", tag="text"):
    data: str
    media_type: str = "text/plain"


class URLDocumentSource(Struct, tag_field="type", tag="url"):
    url: str


class FileDocumentSource(Struct, tag_field="type", tag="file"):
    file_id: str


# ---------------------------------------------------------------- blocks


class TextBlock(_Block, tag="text"):
    text: str
    citations: list[JSONObject] | None = None


class ImageBlock(_Block, tag="image"):
    source: ImageSource


class ContentDocumentSource(Struct, tag_field="type", tag="content"):
    content: str | list[TextBlock | ImageBlock]


DocumentSource = (
    Base64DocumentSource | PlainTextDocumentSource | ContentDocumentSource | URLDocumentSource | FileDocumentSource
)


class DocumentBlock(_Block, tag="document"):
    source: DocumentSource
    title: str | None = None
    context: str | None = None


class SearchResultBlock(_Block, tag="search_result"):
    source: str
    title: str
    content: list[TextBlock]


class ToolReferenceBlock(_Block, tag="tool_reference"):
    tool_name: str = ""


ToolResultContentBlock = TextBlock | ImageBlock | DocumentBlock | SearchResultBlock | ToolReferenceBlock


class ToolUseBlock(_Block, tag="tool_use"):
    id: str
    name: str
    input: JSONObject


class ToolResultBlock(_Block, tag="tool_result"):
    tool_use_id: str
    content: str | list[ToolResultContentBlock] | None = None
    is_error: bool | None = None


class ThinkingBlock(_Block, tag="thinking"):
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Block, tag="redacted_thinking"):
    data: str


class ServerToolUseBlock(_Block, tag="server_tool_use"):
    """A call the Anthropic API made to one of its own server tools."""

    id: str
    name: str
    input: JSONObject | None = None


class _ServerToolResult(_Block):
    """Results of Anthropic-side server tools; they have no Amazon Q equivalent."""

    tool_use_id: str
    content: Any = None


class WebSearchToolResultBlock(_ServerToolResult, tag="web_search_tool_result"):
    pass


class WebFetchToolResultBlock(_ServerToolResult, tag="web_fetch_tool_result"):
    pass


class CodeExecutionToolResultBlock(_ServerToolResult, tag="code_execution_tool_result"):
    pass


class BashCodeExecutionToolResultBlock(_ServerToolResult, tag="bash_code_execution_tool_result"):
    pass


class TextEditorCodeExecutionToolResultBlock(_ServerToolResult, tag="text_editor_code_execution_tool_result"):
    pass


class ToolSearchToolResultBlock(_ServerToolResult, tag="tool_search_tool_result"):
    pass


class ContainerUploadBlock(_Block, tag="container_upload"):
    file_id: str


SERVER_TOOL_RESULT_BLOCKS = (
    WebSearchToolResultBlock,
    WebFetchToolResultBlock,
    CodeExecutionToolResultBlock,
    BashCodeExecutionToolResultBlock,
    TextEditorCodeExecutionToolResultBlock,
    ToolSearchToolResultBlock,
)

ContentBlock = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | SearchResultBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ServerToolUseBlock
    | WebSearchToolResultBlock
    | WebFetchToolResultBlock
    | CodeExecutionToolResultBlock
    | BashCodeExecutionToolResultBlock
    | TextEditorCodeExecutionToolResultBlock
    | ToolSearchToolResultBlock
    | ContainerUploadBlock
)


class Message(Struct, kw_only=True):
    role: Literal["user", "assistant", "system"]
    # `null` content is accepted (Claude Code sends empty system turns) and means "no blocks".
    content: str | list[ContentBlock] | None = None


# ---------------------------------------------------------------- tools and options


WEB_SEARCH_TOOL_PREFIX = "web_search_"  # web_search_20250305 and its dated successors


class Tool(Struct, kw_only=True):
    """A tool definition. Custom tools carry `input_schema`; Anthropic server tools
    (`web_search_20250305`, `bash_20250124`, …) carry a versioned `type` and no schema.
    The web search tool's options (`max_uses`, `allowed_domains`, `blocked_domains`,
    `user_location`) are kept; other server tools' options are not used."""

    name: str
    input_schema: JSONObject | None = None
    description: str | None = None
    type: str | None = None
    max_uses: int | None = None
    cache_control: JSONObject | None = None
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None
    user_location: JSONObject | None = None

    @property
    def is_server_tool(self) -> bool:
        return self.type not in (None, "custom") and self.input_schema is None

    @property
    def is_web_search(self) -> bool:
        return self.is_server_tool and (self.type or "").startswith(WEB_SEARCH_TOOL_PREFIX)


class ToolChoice(Struct, kw_only=True):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingConfig(Struct, kw_only=True):
    type: str
    budget_tokens: int | None = None
    display: str | None = None

    @property
    def enabled(self) -> bool:
        return self.type in ("enabled", "adaptive")


class OutputConfig(Struct, kw_only=True):
    """`output_config`: how much effort the model spends (`low` … `max`), Claude's adaptive-thinking dial."""

    effort: str | None = None


class _RequestCommon(Struct, kw_only=True):
    model: Annotated[str, Meta(min_length=1)]
    messages: Annotated[list[Message], Meta(min_length=1)]
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None


# The `max_tokens` a door sets for a client that gave no limit (the OpenAI APIs make it optional):
# "as much as the model gives", lowered to the model's output limit without a word in the log.
UNSTATED_MAX_TOKENS = 128_000


class MessagesRequest(_RequestCommon, kw_only=True):
    max_tokens: Annotated[int, Meta(ge=0)]
    stream: bool | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    metadata: JSONObject | None = None


class CountTokensRequest(_RequestCommon, kw_only=True):
    pass


# ---------------------------------------------------------------- parsing

_messages_decoder = msgspec.json.Decoder(MessagesRequest)
_count_tokens_decoder = msgspec.json.Decoder(CountTokensRequest)

# msgspec reports paths as `$.messages[0].content[1].text`; Anthropic says `messages.0.content.1.text`.
_PATH_IN_MESSAGE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING_FIELD = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")
# A content block whose `type` is audio: a capability the backend lacks, not a typo to report as such.
_AUDIO_BLOCK = re.compile(r"^Invalid value '(?:input_)?audio'$")
NO_AUDIO = (
    "audio input is not supported: the Amazon Q backend behind this gateway takes no audio, only text "
    "and images; send a transcript of the audio as text instead"
)


def _anthropic_path(msgspec_path: str) -> str:
    return msgspec_path.replace("[", ".").replace("]", "").lstrip(".")


def _invalid_from(exc: msgspec.MsgspecError) -> InvalidRequest:
    text = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        match = _PATH_IN_MESSAGE.search(text)
        path, problem = (_anthropic_path(match["path"]), text[: match.start()]) if match else ("", text)
        missing = _MISSING_FIELD.match(problem)
        if missing:
            path = f"{path}.{missing['field']}" if path else missing["field"]
            problem = "Field required"
        elif path.endswith(".type") and _AUDIO_BLOCK.match(problem):
            problem = NO_AUDIO
        return InvalidRequest(path, problem)
    return InvalidRequest("", f"request body is not valid JSON: {text}")


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    try:
        return decoder.decode(body)
    except msgspec.MsgspecError as exc:
        raise _invalid_from(exc) from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest("", f"request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise InvalidRequest("", "request body is nested too deeply to parse") from None


def _check_forwarded_documents(request: _RequestCommon) -> None:
    """The free-form JSON that travels upstream (tool inputs, tool schemas) must be encodable there."""
    schemas = [tool.input_schema for tool in request.tools or () if tool.input_schema is not None]
    # Exact types: the request comes from the decoder, which makes no subclasses.
    inputs = [
        block.input
        for message in request.messages
        if type(message.content) is list
        for block in message.content
        if type(block) is ToolUseBlock
    ]
    too_deep = first_too_deep([*schemas, *inputs])
    if too_deep is not None:
        raise InvalidRequest(_forwarded_document_paths(request)[too_deep], TOO_DEEP)


def _forwarded_document_paths(request: _RequestCommon) -> list[str]:
    """The paths of the documents `_check_forwarded_documents` looks at, in its order."""
    paths = [
        f"tools.{index}.input_schema" for index, tool in enumerate(request.tools or ()) if tool.input_schema is not None
    ]
    for message_index, message in enumerate(request.messages):
        if isinstance(message.content, list):
            paths += [
                f"messages.{message_index}.content.{block_index}.input"
                for block_index, block in enumerate(message.content)
                if isinstance(block, ToolUseBlock)
            ]
    return paths


def parse_messages_request(body: bytes) -> MessagesRequest:
    """The request, its `cache_control` markers cleared (see parse_messages_request_with_breakpoints)."""
    return parse_messages_request_with_breakpoints(body)[0]


def parse_messages_request_with_breakpoints(body: bytes) -> tuple[MessagesRequest, CacheBreakpoints]:
    """The request and where its `cache_control` breakpoints were; the markers are cleared from
    its blocks, so that two requests that differ only by them have equal messages
    (q2api.conversion.checkpoints). More than MAX_BREAKPOINTS is a 400, as at Anthropic."""
    request: MessagesRequest = _decode(_messages_decoder, body)
    _check_forwarded_documents(request)
    if b'"cache_control"' not in body:  # one search in C: most requests of other clients stop here
        return request, NO_BREAKPOINTS
    return request, _take_breakpoints(request)


def _take_breakpoints(request: MessagesRequest) -> CacheBreakpoints:
    system = _take_markers(request.system if isinstance(request.system, list) else ())
    tools = _take_markers(request.tools or ())
    messages: list[tuple[int, int]] = []
    for message_index, message in enumerate(request.messages):
        content = message.content
        if type(content) is not list:
            continue
        for block_index, block in enumerate(content):
            marked = block.cache_control is not None
            if marked:
                block.cache_control = None
            if type(block) is ToolResultBlock and type(block.content) is list and _take_markers(block.content):
                marked = True  # a marker inside a tool result's content counts for the tool result
            if marked:
                messages.append((message_index, block_index))
    breakpoints = CacheBreakpoints(system, tools, tuple(messages))
    if breakpoints.count > MAX_BREAKPOINTS:
        raise InvalidRequest(
            "", f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints.count}."
        )
    return breakpoints


def _take_markers(items: Sequence[_Block | Tool]) -> tuple[int, ...]:
    """The indices of `items` that carry a marker; the markers are cleared."""
    marked = []
    for index, item in enumerate(items):
        if item.cache_control is not None:
            item.cache_control = None
            marked.append(index)
    return tuple(marked)


def parse_count_tokens_request(body: bytes) -> CountTokensRequest:
    request: CountTokensRequest = _decode(_count_tokens_decoder, body)
    _check_forwarded_documents(request)
    return request


def blocks_of(message: Message) -> list[ContentBlock]:
    """A message's content as a list of blocks (a string is one text block)."""
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    return content
