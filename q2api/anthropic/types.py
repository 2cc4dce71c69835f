"""Claude Messages API request types, validated at the edge with msgspec.

Every field of the current SDK's request types is declared here (the front door's field table,
q2api.frontdoors.claude.fields, says what the gateway does with each: honoured, emulated,
ignored for a stated reason, or refused), and `null` is accepted wherever a field is optional.
A field no type declares — a client newer than this gateway — is not dropped unseen: the
strict decoder stops at it, and the body is read again without it (`read_messages_request`),
which names every such field for the door to report (q2api.anthropic.unknown_fields).

`parse_messages_request` / `parse_count_tokens_request` turn a raw body into
typed values or raise :class:`InvalidRequest` naming the JSON path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from q2api.anthropic.cache_control import MAX_BREAKPOINTS, NO_BREAKPOINTS, CacheBreakpoints
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep
from q2api.anthropic.unknown_fields import strip_unknown_fields

JSONObject = dict[str, Any]


class _Block(Struct, tag_field="type", kw_only=True, forbid_unknown_fields=True):
    """Base of every content block; `type` is the tag.

    `cache_control` is read once, right after parsing, into the request's breakpoints, and then
    cleared (q2api.anthropic.types.parse_messages_request_with_breakpoints): Claude Code moves its cache
    breakpoint to the newest message on every turn, and a block that differs only by it must be
    the same block to the converter, which resumes a conversation where its messages are equal
    (q2api.conversion.checkpoints)."""

    cache_control: JSONObject | None = None


# ---------------------------------------------------------------- sources


class Base64ImageSource(Struct, tag_field="type", tag="base64", forbid_unknown_fields=True):
    media_type: str
    data: str


class URLImageSource(Struct, tag_field="type", tag="url", forbid_unknown_fields=True):
    url: str


class FileImageSource(Struct, tag_field="type", tag="file", forbid_unknown_fields=True):
    file_id: str


ImageSource = Base64ImageSource | URLImageSource | FileImageSource


class Base64DocumentSource(Struct, tag_field="type", tag="base64", forbid_unknown_fields=True):
    media_type: str
    data: str


class PlainTextDocumentSource(Struct, tag_field="type", tag="text", forbid_unknown_fields=True):
    data: str
    media_type: str = "text/plain"


class URLDocumentSource(Struct, tag_field="type", tag="url", forbid_unknown_fields=True):
    url: str


class FileDocumentSource(Struct, tag_field="type", tag="file", forbid_unknown_fields=True):
    file_id: str


# ---------------------------------------------------------------- blocks


class TextBlock(_Block, tag="text"):
    text: str
    citations: list[JSONObject] | None = None


class ImageBlock(_Block, tag="image"):
    source: ImageSource
    transformations: JSONObject | None = None  # what Anthropic does to an oversized image (ignored)


class ContentDocumentSource(Struct, tag_field="type", tag="content", forbid_unknown_fields=True):
    content: str | list[TextBlock | ImageBlock]


DocumentSource = (
    Base64DocumentSource | PlainTextDocumentSource | ContentDocumentSource | URLDocumentSource | FileDocumentSource
)


class DocumentBlock(_Block, tag="document"):
    source: DocumentSource
    title: str | None = None
    context: str | None = None
    citations: JSONObject | None = None  # `{"enabled": bool}`: Amazon Q cites nothing


class SearchResultBlock(_Block, tag="search_result"):
    source: str
    title: str
    content: list[TextBlock]
    citations: JSONObject | None = None  # `{"enabled": bool}`: Amazon Q cites nothing


class ToolReferenceBlock(_Block, tag="tool_reference"):
    tool_name: str = ""


ToolResultContentBlock = TextBlock | ImageBlock | DocumentBlock | SearchResultBlock | ToolReferenceBlock


class ToolUseBlock(_Block, tag="tool_use"):
    id: str
    name: str
    input: JSONObject
    caller: JSONObject | None = None  # who made the call (the model, or Anthropic's code execution)
    toolset_name: str | None = None


class ToolResultBlock(_Block, tag="tool_result"):
    tool_use_id: str
    content: str | list[ToolResultContentBlock] | None = None
    is_error: bool | None = None
    toolset_name: str | None = None


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
    caller: JSONObject | None = None


class _ServerToolResult(_Block):
    """Results of Anthropic-side server tools; they have no Amazon Q equivalent."""

    tool_use_id: str
    content: list[Any] | JSONObject | None = None  # the results, or an error object: never a scalar
    caller: JSONObject | None = None


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


class CompactionBlock(_Block, tag="compaction"):
    """A summary of the conversation before it (context management's compaction): the conversation
    starts again from it (q2api.frontdoors.claude.compaction). `content` None is a compaction that failed,
    which changes nothing; the other fields are Anthropic's, kept only to be accepted."""

    content: str | None = None
    encrypted_content: str | None = None
    signature: str | None = None
    tool_changes: list[Any] | None = None


class FallbackBlock(_Block, tag="fallback"):
    """A record that Anthropic answered with a fallback model; no content for a model."""

    from_: Any = msgspec.field(default=None, name="from")
    to: Any = None
    trigger: Any = None


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
    | CompactionBlock
    | FallbackBlock
)


class SystemMessageOutputConfig(Struct, kw_only=True, forbid_unknown_fields=True):
    """A `role: "system"` message's `output_config`: the effort of the turn it stands before."""

    effort: str | None = None


class Message(Struct, kw_only=True, forbid_unknown_fields=True):
    role: Literal["user", "assistant", "system"]
    # `null` content is accepted (Claude Code sends empty system turns) and means "no blocks".
    content: str | list[ContentBlock] | None = None
    # `role: "system"` only: `next_user_message` shows it to the model only until a later user message.
    clear_at: Literal["next_user_message", "never"] | None = None
    output_config: SystemMessageOutputConfig | None = None


# ---------------------------------------------------------------- tools and options


WEB_SEARCH_TOOL_PREFIX = "web_search_"  # web_search_20250305 and its dated successors
MCP_TOOLSET = "mcp_toolset"  # the one tool type without a `name`


class Tool(Struct, kw_only=True, forbid_unknown_fields=True):
    """A tool definition. Custom tools carry `input_schema`; Anthropic's own tools
    (`web_search_20250305`, `bash_20250124`, …) carry a versioned `type` and no schema.
    The web search tool's options (`max_uses`, `allowed_domains`, `blocked_domains`,
    `user_location`) are kept; what the gateway does with each tool type and field is the
    field table's (q2api.frontdoors.claude.fields)."""

    name: str = ""  # required of every tool but an `mcp_toolset`, which the door refuses by its type
    input_schema: JSONObject | None = None
    description: str | None = None
    type: str | None = None
    max_uses: int | None = None
    cache_control: JSONObject | None = None
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None
    user_location: JSONObject | None = None
    strict: bool | None = None  # the model's input must match `input_schema` (checked on the reply)
    input_examples: list[JSONObject] | None = None
    defer_loading: bool | None = None
    eager_input_streaming: bool | None = None
    allowed_callers: list[str] | None = None
    max_characters: int | None = None  # text_editor_20250728
    response_inclusion: str | None = None  # web_search_20260318
    # Options of tool types the door refuses (computer use, web fetch, MCP toolsets, the advisor):
    # declared so that the refusal names the tool rather than one of its fields.
    display_width_px: int | None = None
    display_height_px: int | None = None
    display_number: int | None = None
    enable_zoom: bool | None = None
    citations: Any = None
    max_content_tokens: int | None = None
    url_sources: Any = None
    use_cache: Any = None
    configs: Any = None
    default_config: Any = None
    mcp_server_name: str | None = None
    tools: Any = None
    model: Any = None
    max_tokens: Any = None
    caching: Any = None

    @property
    def is_server_tool(self) -> bool:
        return self.type not in (None, "custom") and self.input_schema is None

    @property
    def is_web_search(self) -> bool:
        return self.is_server_tool and (self.type or "").startswith(WEB_SEARCH_TOOL_PREFIX)


class ToolChoice(Struct, kw_only=True, forbid_unknown_fields=True):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


# Thinking types that ask for reasoning; `between_tools` reasons between tool calls (interleaved).
THINKING_TYPES = ("enabled", "adaptive", "between_tools")


class ThinkingConfig(Struct, kw_only=True, forbid_unknown_fields=True):
    type: str
    budget_tokens: int | None = None
    display: str | None = None
    block_binding: JSONObject | None = None

    @property
    def enabled(self) -> bool:
        return self.type in THINKING_TYPES


class JsonOutputFormat(Struct, tag_field="type", tag="json_schema", forbid_unknown_fields=True):
    """`output_config.format`: the reply's text is one JSON document matching `schema` (structured outputs)."""

    schema: JSONObject


class OutputConfig(Struct, kw_only=True, forbid_unknown_fields=True):
    """`output_config`: how much effort the model spends (`low` … `max`), Claude's adaptive-thinking dial,
    and the format of the reply."""

    effort: str | None = None
    format: JsonOutputFormat | None = None
    task_budget: JSONObject | None = None


# ---------------------------------------------------------------- context management


class InputTokens(Struct, tag_field="type", tag="input_tokens", forbid_unknown_fields=True):
    value: int


class ToolUses(Struct, tag_field="type", tag="tool_uses", forbid_unknown_fields=True):
    value: int


class ThinkingTurns(Struct, tag_field="type", tag="thinking_turns", forbid_unknown_fields=True):
    value: int


class AllThinkingTurns(Struct, tag_field="type", tag="all", forbid_unknown_fields=True):
    pass


class ClearToolUsesEdit(
    Struct, tag_field="type", tag="clear_tool_uses_20250919", kw_only=True, forbid_unknown_fields=True
):
    """Clear the oldest tool results (and, when asked, tool inputs) once the trigger is reached."""

    trigger: InputTokens | ToolUses | None = None
    keep: ToolUses | None = None
    clear_at_least: InputTokens | None = None
    exclude_tools: list[str] | None = None
    clear_tool_inputs: bool | list[str] | None = None


class ClearThinkingEdit(
    Struct, tag_field="type", tag="clear_thinking_20251015", kw_only=True, forbid_unknown_fields=True
):
    """Clear the thinking of all but the most recent assistant turns."""

    keep: ThinkingTurns | AllThinkingTurns | Literal["all"] | None = None


class CompactEdit(Struct, tag_field="type", tag="compact_20260112", kw_only=True, forbid_unknown_fields=True):
    """Summarise the conversation once the trigger is reached, and go on from the summary."""

    trigger: InputTokens | None = None
    instructions: str | None = None
    pause_after_compaction: bool | None = None


ContextEdit = ClearToolUsesEdit | ClearThinkingEdit | CompactEdit


class ContextManagement(Struct, kw_only=True, forbid_unknown_fields=True):
    edits: list[ContextEdit] | None = None


class CompactionConfig(Struct, kw_only=True, forbid_unknown_fields=True):
    """The top-level `compaction` parameter: summarise the whole conversation now, and answer with that alone."""

    type: Literal["summarize"]
    instructions: str | None = None


class _RequestCommon(Struct, kw_only=True, forbid_unknown_fields=True):
    model: Annotated[str, Meta(min_length=1)]
    messages: Annotated[list[Message], Meta(min_length=1)]
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None
    # Read into the request's breakpoints, then cleared, as the blocks' own (parse_messages_request_with_breakpoints).
    cache_control: JSONObject | None = None
    context_management: ContextManagement | None = None
    compaction: CompactionConfig | None = None
    speed: str | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None
    billing_policy: JSONObject | None = None
    mcp_servers: list[Any] | None = None
    stream: bool | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    metadata: JSONObject | None = None
    container: Any = None  # an id, or `{"id", "skills"}`
    diagnostics: JSONObject | None = None
    inference_geo: str | None = None
    service_tier: str | None = None
    fallback_credit_token: Any = None
    fallbacks: Any = None
    thread: JSONObject | None = None


# The `max_tokens` a door sets for a client that gave no limit (the OpenAI APIs make it optional):
# "as much as the model gives", lowered to the model's output limit without a word in the log.
UNSTATED_MAX_TOKENS = 128_000


class MessagesRequest(_RequestCommon, kw_only=True):
    max_tokens: Annotated[int, Meta(ge=0)]


class CountTokensRequest(_RequestCommon, kw_only=True):
    """The fields of a Messages request, `max_tokens` optional: a client may count the very body it will send."""

    max_tokens: Annotated[int, Meta(ge=0)] | None = None


# ---------------------------------------------------------------- parsing

_messages_decoder = msgspec.json.Decoder(MessagesRequest)
_count_tokens_decoder = msgspec.json.Decoder(CountTokensRequest)

_UNKNOWN_FIELD = "Object contains unknown field"
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


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes) -> tuple[Any, tuple[str, ...]]:
    """The body decoded, and the paths of the fields no type declares (taken out; usually none)."""
    try:
        return decoder.decode(body), ()
    except msgspec.ValidationError as exc:
        if not str(exc).startswith(_UNKNOWN_FIELD):
            raise _invalid_from(exc) from None
    except msgspec.MsgspecError as exc:
        raise _invalid_from(exc) from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest("", f"request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise InvalidRequest("", "request body is nested too deeply to parse") from None
    return _decode_without_unknown_fields(decoder.type, body)


def _decode_without_unknown_fields(request_type: Any, body: bytes) -> tuple[Any, tuple[str, ...]]:
    """The rare path: a field no type declares. The body again as plain JSON (it parsed once), the
    unknown fields taken out, then converted as the decoder would have."""
    try:
        document = msgspec.json.decode(body)
        unknown = strip_unknown_fields(document, request_type)
        return msgspec.convert(document, request_type), tuple(unknown)
    except msgspec.MsgspecError as exc:
        raise _invalid_from(exc) from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest("", f"request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise InvalidRequest("", "request body is nested too deeply to parse") from None


def _check_forwarded_documents(request: _RequestCommon) -> None:
    """The free-form JSON that travels upstream (tool inputs, tool schemas) must be encodable there."""
    schemas = [tool.input_schema for tool in request.tools or () if tool.input_schema is not None]
    # A tool's input examples are written into its description upstream (orjson, limited depth too).
    examples = [tool.input_examples for tool in request.tools or () if tool.input_examples]
    # Exact types: the request comes from the decoder, which makes no subclasses.
    inputs = [
        block.input
        for message in request.messages
        if type(message.content) is list
        for block in message.content
        if type(block) is ToolUseBlock
    ]
    too_deep = first_too_deep([*schemas, *examples, *inputs])
    if too_deep is not None:
        raise InvalidRequest(_forwarded_document_paths(request)[too_deep], TOO_DEEP)


def _forwarded_document_paths(request: _RequestCommon) -> list[str]:
    """The paths of the documents `_check_forwarded_documents` looks at, in its order."""
    paths = [
        f"tools.{index}.input_schema" for index, tool in enumerate(request.tools or ()) if tool.input_schema is not None
    ]
    paths += [f"tools.{index}.input_examples" for index, tool in enumerate(request.tools or ()) if tool.input_examples]
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
    read = read_messages_request(body)
    return read.request, read.breakpoints


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """A request as read from its body: the request, its cache breakpoints, and the paths of the
    fields it carried that no type declares (taken out, for the door to report)."""

    request: MessagesRequest
    breakpoints: CacheBreakpoints
    unknown_fields: tuple[str, ...] = ()


def read_messages_request(body: bytes) -> ReadRequest:
    """`parse_messages_request_with_breakpoints`, and the fields no type declares."""
    request: MessagesRequest
    request, unknown = _decode(_messages_decoder, body)
    _check_request(request)
    if b'"cache_control"' not in body:  # one search in C: most requests of other clients stop here
        return ReadRequest(request, NO_BREAKPOINTS, unknown)
    return ReadRequest(request, _take_breakpoints(request), unknown)


def _check_request(request: _RequestCommon) -> None:
    _check_forwarded_documents(request)
    for index, tool in enumerate(request.tools or ()):
        if not tool.name and tool.type != MCP_TOOLSET:
            raise InvalidRequest(f"tools.{index}.name", "Field required")


def _take_breakpoints(request: MessagesRequest) -> CacheBreakpoints:
    system = _take_markers(request.system if isinstance(request.system, list) else ())
    tools = _take_markers(request.tools or ())
    messages: list[tuple[int, int]] = []
    if request.cache_control is not None:
        # The top-level marker is Anthropic's "automatic" one: it marks the last cacheable block,
        # the last block of the last message (a string content is that message's one block).
        last = len(request.messages) - 1
        content = request.messages[last].content
        messages.append((last, max(len(content) - 1, 0) if isinstance(content, list) else 0))
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
            if marked and (message_index, block_index) not in messages:
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
    return read_count_tokens_request(body)[0]


def read_count_tokens_request(body: bytes) -> tuple[CountTokensRequest, tuple[str, ...]]:
    """The request, and the paths of the fields it carried that no type declares (taken out)."""
    request: CountTokensRequest
    request, unknown = _decode(_count_tokens_decoder, body)
    _check_request(request)
    return request, unknown


def blocks_of(message: Message) -> list[ContentBlock]:
    """A message's content as a list of blocks (a string is one text block)."""
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    return content
