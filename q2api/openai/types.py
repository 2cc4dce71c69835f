"""OpenAI Chat Completions request types, validated at the edge with msgspec.

Strict about what the gateway relies on (roles, part types, tool shapes, numbers
in range). Every top-level field of the SDK's `CompletionCreateParams` is declared
(what the door does with each is its field table's, q2api.frontdoors.chat.fields);
a top-level field no type declares is taken out and named (`read_chat_request`,
q2api.openai.unknown_fields), and `null` is accepted wherever a field is optional.
`parse_chat_request` turns a body into typed values or raises
:class:`InvalidChatRequest` naming the field the way OpenAI does
(`messages[0].content[1].image_url`).
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


class TextPart(Struct, tag_field="type", tag="text"):
    text: str


class ImageURL(Struct, kw_only=True):
    url: str
    detail: str | None = None


class ImagePart(Struct, tag_field="type", tag="image_url"):
    image_url: ImageURL


class InputAudioPart(Struct, tag_field="type", tag="input_audio"):
    input_audio: JSONObject


class FileRef(Struct, kw_only=True):
    file_data: str | None = None  # a data: URL
    file_id: str | None = None
    filename: str | None = None


class FilePart(Struct, tag_field="type", tag="file"):
    file: FileRef


class RefusalPart(Struct, tag_field="type", tag="refusal"):
    refusal: str


UserPart = TextPart | ImagePart | InputAudioPart | FilePart
AssistantPart = TextPart | RefusalPart

# ---------------------------------------------------------------- messages


class FunctionCall(Struct, kw_only=True):
    name: str
    arguments: str = ""  # JSON text, as the model produced it


class ToolCall(Struct, kw_only=True):
    id: str
    function: FunctionCall
    type: Literal["function"] = "function"


class _Message(Struct, tag_field="role", kw_only=True):
    name: str | None = None


class SystemMessage(_Message, tag="system"):
    content: str | list[TextPart]


class DeveloperMessage(_Message, tag="developer"):
    content: str | list[TextPart]


class UserMessage(_Message, tag="user"):
    content: str | list[UserPart]


class AssistantMessage(_Message, tag="assistant"):
    content: str | list[AssistantPart] | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: FunctionCall | None = None  # the legacy `functions` form
    refusal: str | None = None
    audio: JSONObject | None = None  # an earlier audio reply: refused by the door


class ToolMessage(_Message, tag="tool"):
    tool_call_id: str
    content: str | list[TextPart]


class FunctionMessage(_Message, tag="function"):
    """The legacy answer to a `function_call`: it names the function, not a call id."""

    name: str  # required here, optional on the other roles
    content: str | None = None


ChatMessage = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage | FunctionMessage

# ---------------------------------------------------------------- tools and options


class FunctionDefinition(Struct, kw_only=True):
    name: Annotated[str, Meta(min_length=1)]
    description: str | None = None
    parameters: JSONObject | None = None
    strict: bool | None = None


class FunctionTool(Struct, tag_field="type", tag="function"):
    function: FunctionDefinition


class FunctionName(Struct, kw_only=True):
    name: str


class NamedToolChoice(Struct, tag_field="type", tag="function"):
    function: FunctionName


ToolChoiceMode = Literal["auto", "none", "required"]
FunctionCallMode = Literal["auto", "none"]


class StreamOptions(Struct, kw_only=True):
    include_usage: bool | None = None


class TextFormat(Struct, tag_field="type", tag="text"):
    pass


class JsonObjectFormat(Struct, tag_field="type", tag="json_object"):
    pass


class JsonSchemaSpec(Struct, kw_only=True):
    name: str
    schema: JSONObject | None = None
    description: str | None = None
    strict: bool | None = None


class JsonSchemaFormat(Struct, tag_field="type", tag="json_schema"):
    json_schema: JsonSchemaSpec


ResponseFormat = TextFormat | JsonObjectFormat | JsonSchemaFormat
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


class ApproximateLocation(Struct, kw_only=True):
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


class UserLocation(Struct, kw_only=True):
    type: Literal["approximate"] = "approximate"
    approximate: ApproximateLocation | None = None


class WebSearchOptions(Struct, kw_only=True):
    """`web_search_options`: search the web before answering (OpenAI's search models)."""

    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: UserLocation | None = None


class ChatCompletionRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    model: Annotated[str, Meta(min_length=1)]
    messages: Annotated[list[ChatMessage], Meta(min_length=1)]
    max_tokens: Annotated[int, Meta(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Meta(ge=1)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    n: int | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: ToolChoiceMode | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionDefinition] | None = None
    function_call: FunctionCallMode | FunctionName | None = None
    reasoning_effort: ReasoningEffort | None = None
    response_format: ResponseFormat | None = None
    web_search_options: WebSearchOptions | None = None
    modalities: list[str] | None = None
    audio: JSONObject | None = None
    # Fields the door ignores, each for a reason its field table gives.
    frequency_penalty: Any = None
    presence_penalty: Any = None
    logit_bias: Any = None
    seed: Any = None
    logprobs: Any = None
    top_logprobs: Any = None
    prediction: Any = None
    metadata: Any = None
    store: Any = None
    user: Any = None
    safety_identifier: Any = None
    service_tier: Any = None
    prompt_cache_key: Any = None
    prompt_cache_retention: Any = None
    prompt_cache_options: Any = None
    verbosity: Any = None
    moderation: Any = None

    @property
    def output_limit(self) -> int | None:
        """`max_completion_tokens`, or the older `max_tokens` it replaced."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def stop_sequences(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


# ---------------------------------------------------------------- parsing

_decoder = msgspec.json.Decoder(ChatCompletionRequest)
_PATH_IN_MESSAGE = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING_FIELD = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")


def parse_chat_request(body: bytes) -> ChatCompletionRequest:
    return read_chat_request(body)[0]


def read_chat_request(body: bytes) -> tuple[ChatCompletionRequest, tuple[str, ...]]:
    """The request, and the top-level fields it carried that no type declares (taken out)."""
    try:
        try:
            return _decoder.decode(body), ()
        except msgspec.ValidationError as exc:
            if not is_unknown_field(exc):
                raise
        request: ChatCompletionRequest
        request, unknown = without_unknown_fields(body, ChatCompletionRequest)
        return request, unknown
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _PATH_IN_MESSAGE.search(text)
        path, problem = (match["path"], text[: match.start()]) if match else ("", text)
        missing = _MISSING_FIELD.match(problem)
        if missing:
            path = f"{path}.{missing['field']}" if path else missing["field"]
            problem = "Field required"
        raise InvalidChatRequest(path or None, problem) from None
    except msgspec.DecodeError as exc:
        raise InvalidChatRequest(None, f"request body is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidChatRequest(None, f"request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:  # nesting msgspec cannot follow, even in a field the door ignores (`metadata`)
        raise InvalidChatRequest(None, "request body is nested too deeply to parse") from None
