"""OpenAI Responses API request types (`POST /v1/responses`), validated at the edge with msgspec.

Strict about what the gateway relies on (item and part shapes, tool shapes, numbers in range).
Every top-level field of the SDK's `ResponseCreateParams` is declared (what the door does with
each is its field table's, q2api.frontdoors.responses.fields); a top-level field no type declares
is taken out and named (`read_responses_request`, q2api.openai.unknown_fields), and `null` is
accepted wherever a field is optional. `prompt_cache_key` is read: Codex names its conversation
there (q2api.frontdoors.responses.conversation_key).

`input` items are read one by one rather than as one tagged union: a message item may leave out
its `type` (`{"role": "user", "content": "hi"}`, the SDK's "easy" form), which a union keyed on
`type` cannot express. Each item is converted to its own type, and an error names it the way
OpenAI does (`input[3].content[0].image_url`). Item types the gateway cannot carry (other hosted
tools' calls, item references) are refused by the front door, which knows why; here they stay plain
JSON objects (`OtherItem`). The web search tool and its `web_search_call` items have types of their
own (the SDK's `WebSearchTool`, `WebSearchPreviewTool` and `ResponseFunctionWebSearch`), and so do
custom (freeform) tools, their `custom_tool_call` items and the `custom_tool_call_output` items that
answer them (the SDK's `CustomTool`, `ResponseCustomToolCall`, `ResponseCustomToolCallOutput`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from q2api.openai.errors import InvalidChatRequest
from q2api.openai.unknown_fields import is_unknown_field, without_unknown_fields

JSONObject = dict[str, Any]

# ---------------------------------------------------------------- content parts


class InputText(Struct, tag_field="type", tag="input_text"):
    text: str


class InputImage(Struct, tag_field="type", tag="input_image", kw_only=True):
    image_url: str | None = None  # a data: URL (an http(s) URL is refused: the gateway fetches nothing)
    file_id: str | None = None
    detail: str | None = None


class InputFile(Struct, tag_field="type", tag="input_file", kw_only=True):
    file_data: str | None = None  # a data: URL, or bare base64 with `filename`
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None


class OutputText(Struct, tag_field="type", tag="output_text", kw_only=True):
    text: str
    annotations: list[JSONObject] | None = None


class Refusal(Struct, tag_field="type", tag="refusal"):
    refusal: str


class InputAudio(Struct, tag_field="type", tag="input_audio"):
    input_audio: JSONObject | None = None


InputPart = InputText | InputImage | InputFile | InputAudio
# An assistant message resent as input carries output parts; some clients send `input_text` there too.
MessagePart = InputText | InputImage | InputFile | InputAudio | OutputText | Refusal

# ---------------------------------------------------------------- input items


class MessageItem(Struct, kw_only=True):
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[MessagePart]
    id: str | None = None
    status: str | None = None
    phase: str | None = None  # Codex's `commentary` / `final_answer`: kept when stored, not needed upstream


class FunctionCallItem(Struct, kw_only=True):
    call_id: Annotated[str, Meta(min_length=1)]
    name: Annotated[str, Meta(min_length=1)]
    arguments: str = ""  # JSON text, as the model wrote it
    namespace: str | None = None
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(Struct, kw_only=True):
    call_id: Annotated[str, Meta(min_length=1)]
    output: str | list[InputPart]
    id: str | None = None
    status: str | None = None


class CustomToolCallItem(Struct, kw_only=True):
    """A call of a custom tool: its whole input is one string (Codex's `apply_patch` patch)."""

    call_id: Annotated[str, Meta(min_length=1)]
    name: Annotated[str, Meta(min_length=1)]
    input: str = ""
    namespace: str | None = None
    id: str | None = None
    status: str | None = None


class CustomToolCallOutputItem(Struct, kw_only=True):
    call_id: Annotated[str, Meta(min_length=1)]
    output: str | list[InputPart]
    id: str | None = None
    status: str | None = None


class SummaryText(Struct, tag_field="type", tag="summary_text"):
    text: str


class ReasoningText(Struct, tag_field="type", tag="reasoning_text"):
    text: str


class ReasoningItem(Struct, kw_only=True):
    summary: list[SummaryText] = []
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    id: str | None = None
    status: str | None = None


class WebSearchCallItem(Struct, kw_only=True):
    """An earlier web search (the SDK's `ResponseFunctionWebSearch`): `action` holds the query and,
    when the client asked for them, the sources."""

    id: str | None = None
    status: str | None = None
    action: JSONObject | None = None


class OtherItem(Struct, kw_only=True):
    """An item of a type the gateway does not carry; the front door refuses it, naming the type."""

    type: str


InputItem = (
    MessageItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | CustomToolCallItem
    | CustomToolCallOutputItem
    | ReasoningItem
    | WebSearchCallItem
    | OtherItem
)
_ITEM_TYPES: dict[str, type[Struct]] = {
    "message": MessageItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
    "custom_tool_call": CustomToolCallItem,
    "custom_tool_call_output": CustomToolCallOutputItem,
    "reasoning": ReasoningItem,
    "web_search_call": WebSearchCallItem,
}

# ---------------------------------------------------------------- tools and options


class FunctionTool(Struct, kw_only=True):
    name: Annotated[str, Meta(min_length=1)]
    parameters: JSONObject | None = None
    description: str | None = None
    strict: bool | None = None


class CustomToolFormatText(Struct, tag_field="type", tag="text"):
    """Unconstrained text: the default format of a custom tool."""


class CustomToolFormatGrammar(Struct, tag_field="type", tag="grammar", kw_only=True):
    """The input must match a grammar (Codex's `apply_patch` gives a Lark one)."""

    definition: str
    syntax: Literal["lark", "regex"]


CustomToolFormat = CustomToolFormatText | CustomToolFormatGrammar


class CustomTool(Struct, kw_only=True):
    """A custom (freeform) tool: the model writes its input as one string, not as JSON arguments."""

    name: Annotated[str, Meta(min_length=1)]
    description: str | None = None
    format: CustomToolFormat | None = None


class NamespaceTool(Struct, kw_only=True):
    """Codex's group of function (or custom) tools under one name (`multi_agent_v1`); calls name both."""

    name: Annotated[str, Meta(min_length=1)]
    tools: list[JSONObject]
    description: str | None = None


class SearchFilters(Struct, kw_only=True):
    allowed_domains: list[str] | None = None


class UserLocation(Struct, kw_only=True):
    type: Literal["approximate"] | None = None
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


# The SDK's `WebSearchTool.type` and `WebSearchPreviewTool.type` (openai/types/responses/web_search_tool.py,
# web_search_preview_tool.py).
WEB_SEARCH_TOOL_TYPES = ("web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11")


class WebSearchTool(Struct, kw_only=True):
    """OpenAI's hosted web search, in either spelling (`web_search…` or `web_search_preview…`)."""

    type: str
    filters: SearchFilters | None = None  # `web_search` only
    user_location: UserLocation | None = None
    search_context_size: Literal["low", "medium", "high"] | None = None
    external_web_access: bool | None = None  # `web_search` only
    search_content_types: list[Literal["text", "image"]] | None = None  # `web_search_preview` only


class HostedTool(Struct, kw_only=True):
    """A tool OpenAI runs itself (`file_search`, `code_interpreter`, …): kept by type for the refusal."""

    type: str


Tool = FunctionTool | CustomTool | NamespaceTool | WebSearchTool | HostedTool


class Reasoning(Struct, kw_only=True):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None  # the older spelling of `summary`


class TextFormatText(Struct, tag_field="type", tag="text"):
    pass


class TextFormatJsonObject(Struct, tag_field="type", tag="json_object"):
    pass


class TextFormatJsonSchema(Struct, tag_field="type", tag="json_schema", kw_only=True):
    name: Annotated[str, Meta(min_length=1)]
    schema: JSONObject
    description: str | None = None
    strict: bool | None = None


TextFormat = TextFormatText | TextFormatJsonObject | TextFormatJsonSchema


class TextConfig(Struct, kw_only=True):
    format: TextFormat | None = None
    verbosity: str | None = None


ToolChoiceMode = Literal["auto", "none", "required"]


class ResponsesRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    model: Annotated[str, Meta(min_length=1)] | None = None
    input: str | list[JSONObject] | None = None
    instructions: str | None = None
    tools: list[JSONObject] | None = None
    tool_choice: ToolChoiceMode | JSONObject | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: Annotated[int, Meta(ge=1)] | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    reasoning: Reasoning | None = None
    text: TextConfig | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    stream: bool | None = None
    include: list[str] | None = None
    background: bool | None = None
    conversation: str | JSONObject | None = None
    prompt: JSONObject | None = None
    prompt_cache_key: str | None = None
    background_options: JSONObject | None = None
    context_management: Any = None
    # Fields the door ignores, each for a reason its field table gives.
    top_logprobs: Any = None
    stream_options: Any = None
    max_tool_calls: Any = None
    service_tier: Any = None
    user: Any = None
    safety_identifier: Any = None
    prompt_cache_retention: Any = None
    prompt_cache_options: Any = None
    moderation: Any = None
    image: Any = None
    access_programs: Any = None
    client_metadata: Any = None  # Codex's, beside the SDK's fields


# ---------------------------------------------------------------- parsing

_decoder = msgspec.json.Decoder(ResponsesRequest)
_PATH_IN_MESSAGE = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING_FIELD = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")


def parse_responses_request(body: bytes) -> ResponsesRequest:
    return read_responses_request(body)[0]


def read_responses_request(body: bytes) -> tuple[ResponsesRequest, tuple[str, ...]]:
    """The request, and the top-level fields it carried that no type declares (taken out)."""
    try:
        try:
            return _decoder.decode(body), ()
        except msgspec.ValidationError as exc:
            if not is_unknown_field(exc):
                raise
        request: ResponsesRequest
        request, unknown = without_unknown_fields(body, ResponsesRequest)
        return request, unknown
    except msgspec.ValidationError as exc:
        raise _invalid(exc) from None
    except msgspec.DecodeError as exc:
        raise InvalidChatRequest(None, f"request body is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidChatRequest(None, f"request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise InvalidChatRequest(None, "request body is nested too deeply to parse") from None


def input_items(request: ResponsesRequest) -> list[InputItem]:
    """`input` as typed items (a string is one user message); raises InvalidChatRequest naming the item."""
    if request.input is None:
        return []
    if isinstance(request.input, str):
        return [MessageItem(role="user", content=request.input)]
    return [read_item(raw, f"input[{index}]") for index, raw in enumerate(request.input)]


def read_item(raw: JSONObject, where: str) -> InputItem:
    """One item as JSON (an input item, or one the gateway stored) → its type; `where` names it in errors."""
    kind = raw.get("type", "message")  # the SDK's "easy" message form has no `type`
    if not isinstance(kind, str):
        raise InvalidChatRequest(f"{where}.type", "must be a string")
    target = _ITEM_TYPES.get(kind)
    fields = {key: value for key, value in raw.items() if key != "type"}
    try:
        if target is None:
            return OtherItem(type=kind)
        converted: InputItem = msgspec.convert(fields, target)  # type: ignore[assignment]  # one of InputItem's types
        return converted
    except msgspec.ValidationError as exc:
        raise _invalid(exc, where) from None


def read_tool(raw: JSONObject, where: str) -> Tool:
    kind = raw.get("type")
    fields = {key: value for key, value in raw.items() if key != "type"}
    try:
        if kind == "function":
            return msgspec.convert(fields, FunctionTool)
        if kind == "custom":
            return msgspec.convert(fields, CustomTool)
        if kind == "namespace":
            return msgspec.convert(fields, NamespaceTool)
        if kind in WEB_SEARCH_TOOL_TYPES:
            return msgspec.convert(raw, WebSearchTool)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, where) from None
    if not isinstance(kind, str):
        raise InvalidChatRequest(f"{where}.type", "Field required" if kind is None else "must be a string")
    return HostedTool(type=kind)


def _invalid(exc: msgspec.ValidationError, prefix: str = "") -> InvalidChatRequest:
    text = str(exc)
    match = _PATH_IN_MESSAGE.search(text)
    path, problem = (match["path"], text[: match.start()]) if match else ("", text)
    missing = _MISSING_FIELD.match(problem)
    if missing:
        path = f"{path}.{missing['field']}" if path else missing["field"]
        problem = "Field required"
    if prefix:
        path = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"
    return InvalidChatRequest(path or None, problem)
