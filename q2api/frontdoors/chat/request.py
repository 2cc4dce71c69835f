"""OpenAI Chat Completions request → the internal Claude `MessagesRequest`. Pure.

    translated = claude_request(parse_chat_request(body))
    translated.request   # what the shared pipeline converts to Amazon Q (one converter for both doors)
    translated.options   # what the reply needs: usage chunk, reasoning shown, legacy functions, JSON check
    translated.param_for("messages.3.content.0.source")   # → "messages[4].content[0].image_url.url"

The mapping, message by message:

* leading `system` / `developer` messages → the Claude `system` prompt; later ones → Claude
  `system` turns (the converter labels them as context where they stand);
* `user` text and `image_url` parts (a `data:` URL; an http(s) URL is refused, not fetched) and
  `file` parts with `file_data` → text, image and document blocks;
* `assistant` content, `tool_calls` and the legacy `function_call` → text and `tool_use` blocks;
* `tool` messages (and legacy `function` messages, matched by name) → `tool_result` blocks of one
  user turn;
* `tools` / `functions`, `tool_choice` / `function_call`, `parallel_tool_calls`, `stop`,
  `max_completion_tokens` / `max_tokens`, `reasoning_effort` and `response_format` → their Claude
  counterparts; `web_search_options` → Anthropic's web search tool (its `user_location` too), which
  the relay runs like any Claude request's (q2api.conversion.web_search). What Amazon Q cannot enforce (a forced or named tool, no parallel calls) is
  reported by the converter, as on the Claude side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep
from q2api.anthropic.types import (
    Base64DocumentSource,
    Base64ImageSource,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    MessagesRequest,
    OutputConfig,
    TextBlock,
    ThinkingConfig,
    Tool,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from q2api.frontdoors.openai_shared import (
    DEFAULT_MAX_TOKENS,
    SCHEMA_PARAM,
    THINKING_BUDGETS,
    WEB_SEARCH_TOOL_TYPE,
    ResponseCheck,
    arguments_object,
    data_url_parts,
    response_check,
)
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.types import (
    AssistantMessage,
    ChatCompletionRequest,
    DeveloperMessage,
    FilePart,
    FunctionDefinition,
    FunctionMessage,
    ImagePart,
    InputAudioPart,
    JsonSchemaFormat,
    NamedToolChoice,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
    WebSearchOptions,
)

_EMPTY_SCHEMA = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ReplyOptions:
    """How the Claude reply becomes the OpenAI one."""

    include_usage: bool = False  # the usage chunk before `[DONE]`
    show_reasoning: bool = False  # thinking as `reasoning_content`, only when `reasoning_effort` asked for it
    legacy_functions: bool = False  # answer with `function_call` instead of `tool_calls`
    check: ResponseCheck | None = None  # `response_format`: the reply text must pass it


@dataclass(frozen=True, slots=True)
class TranslatedRequest:
    request: MessagesRequest
    options: ReplyOptions
    origins: Mapping[str, str]  # Claude path (`messages.3.content.0`) → the client's OpenAI param

    def param_for(self, claude_path: str) -> str | None:
        """The OpenAI field behind a Claude path, from its longest known prefix."""
        parts = claude_path.split(".")
        for end in range(len(parts), 0, -1):
            param = self.origins.get(".".join(parts[:end]))
            if param is not None:
                return param
        return None


def claude_request(chat: ChatCompletionRequest) -> TranslatedRequest:
    _check_free_form_documents(chat)
    if chat.n not in (None, 1):
        raise InvalidChatRequest("n", "only n=1 is supported: Amazon Q returns one choice per request")
    _refuse_audio(chat)
    builder = _MessagesBuilder()
    for index, message in enumerate(chat.messages):
        builder.add(index, message)
    if not builder.messages:
        raise InvalidChatRequest("messages", "the request holds no user or assistant message")
    tools, tool_origins = _tools(chat)
    if chat.web_search_options is not None:
        tools.append(_web_search_tool(chat.web_search_options))
        tool_origins[f"tools.{len(tools) - 1}"] = "web_search_options"
    check = response_check(chat.response_format)
    system = builder.system
    if check is not None:
        system = [*system, TextBlock(text=check.instruction)]
    effort = chat.reasoning_effort
    thinking = (
        None if effort in (None, "none") else ThinkingConfig(type="enabled", budget_tokens=THINKING_BUDGETS[effort])
    )
    request = MessagesRequest(
        output_config=OutputConfig(effort=effort) if thinking is not None and effort else None,
        model=chat.model,
        messages=builder.messages,
        system=system or None,
        tools=tools or None,
        tool_choice=_tool_choice(chat, {tool.name for tool in tools}),
        thinking=thinking,
        max_tokens=chat.output_limit or DEFAULT_MAX_TOKENS,
        stream=bool(chat.stream),
        stop_sequences=chat.stop_sequences or None,
        temperature=chat.temperature,
        top_p=chat.top_p,
    )
    options = ReplyOptions(
        include_usage=bool(chat.stream and chat.stream_options and chat.stream_options.include_usage),
        show_reasoning=thinking is not None,
        legacy_functions=bool(chat.functions) and not chat.tools,
        check=check,
    )
    return TranslatedRequest(request, options, {**builder.origins, **tool_origins})


_AUDIO = "Amazon Q takes text and images and answers in text: send a transcript instead"


def _refuse_audio(chat: ChatCompletionRequest) -> None:
    if chat.audio is not None:
        raise InvalidChatRequest("audio", f"audio output is not supported: {_AUDIO}")
    if chat.modalities is not None and set(chat.modalities) - {"text"}:
        raise InvalidChatRequest("modalities", 'the reply is text only: leave `modalities` out or ask for ["text"]')
    for index, message in enumerate(chat.messages):
        if isinstance(message, AssistantMessage) and message.audio is not None:
            raise InvalidChatRequest(f"messages[{index}].audio", f"audio replies are not supported: {_AUDIO}")


def _check_free_form_documents(chat: ChatCompletionRequest) -> None:
    """The schemas the gateway forwards upstream (tool parameters) or evaluates (the response schema) must
    nest no deeper than the encoders and the validator can follow (tool-call arguments: `_arguments`)."""
    located = [
        *(
            (f"tools[{index}].function.parameters", tool.function.parameters)
            for index, tool in enumerate(chat.tools or ())
        ),
        *(
            (f"functions[{index}].parameters", function.parameters)
            for index, function in enumerate(chat.functions or ())
        ),
    ]
    if isinstance(chat.response_format, JsonSchemaFormat):
        located.append((SCHEMA_PARAM, chat.response_format.json_schema.schema))
    present = [(param, document) for param, document in located if document is not None]
    too_deep = first_too_deep([document for _, document in present])
    if too_deep is not None:
        raise InvalidChatRequest(present[too_deep][0], TOO_DEEP)


class _MessagesBuilder:
    """Claude messages in order, with the OpenAI origin of every message and block."""

    def __init__(self) -> None:
        self.system: list[TextBlock] = []
        self.messages: list[Message] = []
        self.origins: dict[str, str] = {}
        self._results_open = False  # the last message is a user turn of tool results still growing
        self._legacy_calls: dict[str, list[str]] = {}  # function name → unanswered legacy call ids

    def add(self, index: int, message: object) -> None:
        path = f"messages[{index}]"
        if isinstance(message, SystemMessage | DeveloperMessage):
            text = _text_of(message.content)
            if not self.messages:
                self.system.append(TextBlock(text=text))
            else:
                self._append("system", [(TextBlock(text=text), f"{path}.content")], path)
        elif isinstance(message, UserMessage):
            self._append("user", _user_blocks(message, path), path)
        elif isinstance(message, AssistantMessage):
            self._append("assistant", self._assistant_blocks(message, index, path), path)
        elif isinstance(message, ToolMessage):
            result = ToolResultBlock(tool_use_id=message.tool_call_id, content=_text_of(message.content))
            self._add_result(result, path)
        elif isinstance(message, FunctionMessage):
            pending = self._legacy_calls.get(message.name)
            if not pending:
                raise InvalidChatRequest(
                    f"{path}.name", f"no earlier assistant function_call of {message.name!r} is left to answer"
                )
            self._add_result(ToolResultBlock(tool_use_id=pending.pop(0), content=message.content or ""), path)

    def _append(self, role: str, blocks: list[tuple[ContentBlock, str]], path: str) -> None:
        position = len(self.messages)
        self.messages.append(Message(role=role, content=[block for block, _ in blocks]))  # type: ignore[arg-type]
        self.origins[f"messages.{position}"] = path
        for number, (_, origin) in enumerate(blocks):
            self.origins[f"messages.{position}.content.{number}"] = origin
        self._results_open = False

    def _add_result(self, result: ToolResultBlock, path: str) -> None:
        if self._results_open:
            # Consecutive tool messages answer one assistant turn: one user turn holds them all.
            last = self.messages[-1]
            assert isinstance(last.content, list)
            self.origins[f"messages.{len(self.messages) - 1}.content.{len(last.content)}"] = path
            last.content.append(result)
            return
        self._append("user", [(result, path)], path)
        self._results_open = True

    def _assistant_blocks(self, message: AssistantMessage, index: int, path: str) -> list[tuple[ContentBlock, str]]:
        blocks: list[tuple[ContentBlock, str]] = []
        content = message.content
        if isinstance(content, str):
            if content:
                blocks.append((TextBlock(text=content), f"{path}.content"))
        else:
            for number, part in enumerate(content or ()):
                text = part.text if isinstance(part, TextPart) else part.refusal
                blocks.append((TextBlock(text=text), f"{path}.content[{number}]"))
        if message.refusal and not blocks:
            blocks.append((TextBlock(text=message.refusal), f"{path}.refusal"))
        for number, call in enumerate(message.tool_calls or ()):
            where = f"{path}.tool_calls[{number}]"
            tool_input = arguments_object(call.function.arguments, f"{where}.function.arguments")
            blocks.append((ToolUseBlock(id=call.id, name=call.function.name, input=tool_input), where))
        if message.function_call is not None:
            # Legacy calls carry no id: one is made up here, and the `function` message answering it finds it by name.
            call_id = f"call_legacy_{index}"
            self._legacy_calls.setdefault(message.function_call.name, []).append(call_id)
            tool_input = arguments_object(message.function_call.arguments, f"{path}.function_call.arguments")
            blocks.append(
                (ToolUseBlock(id=call_id, name=message.function_call.name, input=tool_input), f"{path}.function_call")
            )
        return blocks


def _text_of(content: str | list[TextPart]) -> str:
    return content if isinstance(content, str) else "\n".join(part.text for part in content)


def _user_blocks(message: UserMessage, path: str) -> list[tuple[ContentBlock, str]]:
    if isinstance(message.content, str):
        return [(TextBlock(text=message.content), f"{path}.content")] if message.content else []
    blocks: list[tuple[ContentBlock, str]] = []
    for number, part in enumerate(message.content):
        where = f"{path}.content[{number}]"
        if isinstance(part, TextPart):
            blocks.append((TextBlock(text=part.text), where))
        elif isinstance(part, ImagePart):
            media_type, data = data_url_parts(part.image_url.url, f"{where}.image_url.url", "image")
            blocks.append(
                (ImageBlock(source=Base64ImageSource(media_type=media_type, data=data)), f"{where}.image_url.url")
            )
        elif isinstance(part, FilePart):
            blocks.append((_document(part, f"{where}.file"), f"{where}.file"))
        elif isinstance(part, InputAudioPart):
            raise InvalidChatRequest(f"{where}.type", "audio input is not supported: Amazon Q takes text and images")
    return blocks


def _document(part: FilePart, where: str) -> DocumentBlock:
    if part.file.file_data is None:
        raise InvalidChatRequest(
            f"{where}.file_id", "file ids (Files API) are not supported; send the file inline as file_data"
        )
    media_type, data = data_url_parts(part.file.file_data, f"{where}.file_data", "file")
    return DocumentBlock(source=Base64DocumentSource(media_type=media_type, data=data), title=part.file.filename)


def _tools(chat: ChatCompletionRequest) -> tuple[list[Tool], dict[str, str]]:
    definitions: list[tuple[FunctionDefinition, str]] = [
        (tool.function, f"tools[{index}]") for index, tool in enumerate(chat.tools or ())
    ]
    definitions += [(function, f"functions[{index}]") for index, function in enumerate(chat.functions or ())]
    tools, origins = [], {}
    for position, (function, origin) in enumerate(definitions):
        tools.append(
            Tool(
                name=function.name,
                input_schema=function.parameters or dict(_EMPTY_SCHEMA),
                description=function.description,
                strict=function.strict,
            )
        )
        origins[f"tools.{position}"] = origin
    return tools, origins


def _web_search_tool(options: WebSearchOptions) -> Tool:
    location = options.user_location.approximate if options.user_location is not None else None
    user_location = None
    if location is not None:
        fields = {"city": location.city, "country": location.country, "region": location.region}
        user_location = {"type": "approximate", **{k: v for k, v in fields.items() if v}}
        if location.timezone:
            user_location["timezone"] = location.timezone
    return Tool(name="web_search", type=WEB_SEARCH_TOOL_TYPE, user_location=user_location)


def _tool_choice(chat: ChatCompletionRequest, names: set[str]) -> ToolChoice | None:
    choice = chat.tool_choice if chat.tool_choice is not None else chat.function_call
    param = "tool_choice" if chat.tool_choice is not None else "function_call"
    no_parallel = True if chat.parallel_tool_calls is False else None
    if choice is None:
        return ToolChoice(type="auto", disable_parallel_tool_use=True) if no_parallel else None
    if isinstance(choice, str):
        kind = {"auto": "auto", "none": "none", "required": "any"}[choice]
        return ToolChoice(type=kind, disable_parallel_tool_use=no_parallel)  # type: ignore[arg-type]
    name = choice.function.name if isinstance(choice, NamedToolChoice) else choice.name
    if name not in names:
        where = f"{param}.function.name" if isinstance(choice, NamedToolChoice) else f"{param}.name"
        raise InvalidChatRequest(where, f"{name!r} is not one of the request's tools")
    return ToolChoice(type="tool", name=name, disable_parallel_tool_use=no_parallel)
