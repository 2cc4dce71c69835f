"""OpenAI Responses request (plus the stored conversation it continues) → the internal Claude request. Pure.

    translated = claude_request(parse_responses_request(body), history)
    translated.request      # what the shared pipeline converts to Amazon Q (one converter for every door)
    translated.options      # what the reply needs: reasoning shown as summaries, tool names, text.format check
    translated.items        # this request's input items as the store keeps them (ids given)
    translated.param_for("messages.3.content.0.source")   # → "input[4].content[0].image_url"

The mapping, item by item, in order (the stored conversation first, then `input`):

* `instructions` → the Claude `system` prompt; leading `system` / `developer` messages join it,
  later ones become Claude `system` turns (the converter labels them as context where they stand);
* `user` messages: `input_text`, `input_image` (a `data:` URL; an http(s) URL is refused, not
  fetched) and `input_file` (`file_data`) → text, image and document blocks;
* `assistant` messages → text; `reasoning` items → thinking (their text, their
  `encrypted_content` as the signature);
* `function_call` and `custom_tool_call` items → `tool_use` blocks of the assistant turn (a custom
  call's input text as `{"input": text}`, custom_tools.py), `function_call_output` and
  `custom_tool_call_output` items → `tool_result` blocks of one user turn (consecutive items of one
  kind share their turn, so a round of parallel calls and its outputs stay together);
  `web_search_call` items → the Claude door's search blocks of the assistant turn (web_search.py);
* function and custom tools (tools.py: a `namespace` tool's included, named `namespace__name`;
  the web search tool onto the Claude door's, web_search.py; other hosted tools refused),
  `tool_choice`, `parallel_tool_calls`, `max_output_tokens`, `reasoning.effort` and `text.format`
  → their Claude counterparts; free-form JSON nested too
  deep is refused (depth.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from q2api.anthropic.types import (
    Base64DocumentSource,
    Base64ImageSource,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    MessagesRequest,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ThinkingConfig,
    ToolResultBlock,
    ToolResultContentBlock,
    ToolUseBlock,
)
from q2api.frontdoors.openai_shared import (
    DEFAULT_MAX_TOKENS,
    THINKING_BUDGETS,
    ResponseCheck,
    arguments_object,
    data_url_parts,
    response_check,
)
from q2api.frontdoors.responses.custom_tools import claude_tool_input
from q2api.frontdoors.responses.depth import refuse_too_deep
from q2api.frontdoors.responses.tools import ToolName, claude_tool_choice, claude_tool_name, claude_tools
from q2api.frontdoors.responses.web_search import SOURCES_INCLUDE, history_blocks
from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.openai.responses_types import (
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputAudio,
    InputFile,
    InputImage,
    InputItem,
    InputText,
    MessageItem,
    MessagePart,
    OtherItem,
    OutputText,
    ReasoningItem,
    Refusal,
    ResponsesRequest,
    TextFormatJsonObject,
    TextFormatJsonSchema,
    WebSearchCallItem,
    input_items,
    read_item,
)
from q2api.openai.types import JsonObjectFormat, JsonSchemaFormat, JsonSchemaSpec

HISTORY_PARAM = "previous_response_id"  # where an item of the stored conversation came from
# OpenAI's limits on `metadata`.
_METADATA_PAIRS, _METADATA_KEY, _METADATA_VALUE = 16, 64, 512
# Id prefixes of the items the gateway names, as the OpenAI API spells them.
ITEM_ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "web_search_call": "ws",
}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


@dataclass(frozen=True, slots=True)
class ReplyOptions:
    """How the Claude reply becomes the Responses one."""

    summaries: bool = False  # thinking as reasoning summaries (`reasoning.summary`), else as reasoning text
    encrypted_reasoning: bool = False  # `include: ["reasoning.encrypted_content"]`: the signature goes back
    check: ResponseCheck | None = None  # `text.format`: the reply text must pass it
    tool_names: Mapping[str, ToolName] = field(default_factory=dict)  # Claude tool name → the client's
    search_sources: bool = False  # `include: ["web_search_call.action.sources"]`: a search item lists its sources


@dataclass(frozen=True, slots=True)
class TranslatedResponses:
    request: MessagesRequest
    options: ReplyOptions
    origins: Mapping[str, str]  # Claude path (`messages.3.content.0`) → the client's Responses param
    items: list[dict[str, Any]]  # this request's input items, as stored and listed by `input_items`

    def param_for(self, claude_path: str) -> str | None:
        """The Responses field behind a Claude path, from its longest known prefix."""
        parts = claude_path.split(".")
        for end in range(len(parts), 0, -1):
            param = self.origins.get(".".join(parts[:end]))
            if param is not None:
                return param
        return None


def claude_request(
    responses: ResponsesRequest,
    history: Sequence[dict[str, Any]] = (),
    *,
    previous_model: str | None = None,
    generate: bool = True,
) -> TranslatedResponses:
    """`history`: the stored items of the conversation `previous_response_id` continues, oldest first.
    `generate` False: a turn prepared without a model call (the WebSocket's `generate: false`), which
    may hold no message yet (Codex prepares its instructions and tools alone)."""
    _refuse_unsupported(responses)
    model = responses.model or previous_model
    if not model:
        raise InvalidChatRequest("model", "Field required")
    builder = _MessagesBuilder()
    if responses.instructions:
        builder.system.append(TextBlock(text=responses.instructions))
    for stored in history:
        builder.add(read_item(stored, HISTORY_PARAM), HISTORY_PARAM)
    items = input_items(responses)
    for index, item in enumerate(items):
        builder.add(item, f"input[{index}]")
    if not builder.messages and generate:
        raise InvalidChatRequest("input", "the request holds no user or assistant message")
    tools, tool_names, tool_origins = claude_tools(responses)
    check = _text_check(responses)
    system = builder.system
    if check is not None:
        system = [*system, TextBlock(text=check.instruction)]
    reasoning = responses.reasoning
    effort = reasoning.effort if reasoning else None
    thinking = (
        None if effort in (None, "none") else ThinkingConfig(type="enabled", budget_tokens=THINKING_BUDGETS[effort])
    )
    request = MessagesRequest(
        model=model,
        messages=builder.messages,
        system=system or None,
        tools=tools or None,
        tool_choice=claude_tool_choice(responses, tool_names, tools),
        thinking=thinking,
        max_tokens=responses.max_output_tokens or DEFAULT_MAX_TOKENS,
        stream=bool(responses.stream),
        temperature=responses.temperature,
        top_p=responses.top_p,
    )
    options = ReplyOptions(
        summaries=bool(reasoning and (reasoning.summary or reasoning.generate_summary)),
        encrypted_reasoning="reasoning.encrypted_content" in (responses.include or ()),
        check=check,
        tool_names=tool_names,
        search_sources=SOURCES_INCLUDE in (responses.include or ()),
    )
    kept = [stored_item(raw, item) for raw, item in zip(_raw_items(responses), items, strict=True)]
    return TranslatedResponses(request, options, {**builder.origins, **tool_origins}, kept)


def _refuse_unsupported(responses: ResponsesRequest) -> None:
    if responses.background:
        raise InvalidChatRequest(
            "background", "background responses are not supported: the gateway answers while the client waits"
        )
    if responses.conversation is not None:
        raise InvalidChatRequest(
            "conversation", "the Conversations API is not supported; continue with previous_response_id"
        )
    if responses.prompt is not None:
        raise InvalidChatRequest("prompt", "stored prompt templates are not supported; send the text as input")
    if responses.background_options is not None:
        raise InvalidChatRequest(
            "background_options", "background responses are not supported: the gateway answers while the client waits"
        )
    if responses.context_management is not None:
        raise InvalidChatRequest(
            "context_management",
            "server-side compaction of a Responses conversation is not supported: leave it out (Codex compacts by itself)",
        )
    metadata = responses.metadata or {}
    if len(metadata) > _METADATA_PAIRS:
        raise InvalidChatRequest("metadata", f"at most {_METADATA_PAIRS} key-value pairs")
    for key, value in metadata.items():
        if len(key) > _METADATA_KEY or len(value) > _METADATA_VALUE:
            raise InvalidChatRequest(
                f"metadata.{key[:_METADATA_KEY]}",
                f"keys are at most {_METADATA_KEY} characters and values at most {_METADATA_VALUE}",
            )


# ---------------------------------------------------------------- items


class _MessagesBuilder:
    """Claude messages in order, with the Responses origin of every message and block."""

    def __init__(self) -> None:
        self.system: list[TextBlock] = []
        self.messages: list[Message] = []
        self.origins: dict[str, str] = {}

    def add(self, item: InputItem, where: str) -> None:
        if isinstance(item, MessageItem):
            self._add_message(item, where)
        elif isinstance(item, FunctionCallItem):
            tool_input = arguments_object(item.arguments, f"{where}.arguments")
            name = claude_tool_name(item.name, item.namespace)
            self._append("assistant", [(ToolUseBlock(id=item.call_id, name=name, input=tool_input), where)], where)
        elif isinstance(item, CustomToolCallItem):
            name = claude_tool_name(item.name, item.namespace)
            call = ToolUseBlock(id=item.call_id, name=name, input=claude_tool_input(item.input))
            self._append("assistant", [(call, where)], where)
        elif isinstance(item, FunctionCallOutputItem | CustomToolCallOutputItem):
            content = item.output if isinstance(item.output, str) else _result_blocks(item.output, f"{where}.output")
            self._append("user", [(ToolResultBlock(tool_use_id=item.call_id, content=content), where)], where)
        elif isinstance(item, ReasoningItem):
            block = _thinking(item)
            if block is not None:
                self._append("assistant", [(block, where)], where)
        elif isinstance(item, WebSearchCallItem):
            self._append("assistant", [(block, where) for block in history_blocks(item)], where)
        elif isinstance(item, OtherItem):
            raise InvalidChatRequest(f"{where}.type", _unsupported_item(item.type))

    def _add_message(self, item: MessageItem, where: str) -> None:
        if item.role in ("system", "developer"):
            text = _plain_text(item.content, where)
            if not self.messages:
                self.system.append(TextBlock(text=text))
            else:
                self._append("system", [(TextBlock(text=text), f"{where}.content")], where)
            return
        blocks: list[tuple[ContentBlock, str]]
        if isinstance(item.content, str):
            blocks = [(TextBlock(text=item.content), f"{where}.content")] if item.content else []
        else:
            blocks = [_block(part, f"{where}.content[{n}]") for n, part in enumerate(item.content)]
        self._append(item.role, blocks, where)

    def _append(self, role: str, blocks: list[tuple[ContentBlock, str]], where: str) -> None:
        """Blocks of consecutive items of one role join one message: a round of parallel calls,
        or the outputs that answer it, stays one turn."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == role and role != "system" and isinstance(last.content, list):
            position = len(self.messages) - 1
            first = len(last.content)
            last.content.extend(block for block, _ in blocks)
        else:
            position, first = len(self.messages), 0
            self.messages.append(Message(role=role, content=[block for block, _ in blocks]))  # type: ignore[arg-type]
            self.origins[f"messages.{position}"] = where
        for number, (_, origin) in enumerate(blocks, start=first):
            self.origins[f"messages.{position}.content.{number}"] = origin


def _unsupported_item(kind: str) -> str:
    if kind == "item_reference":
        return "item references are not supported; send the item itself, or continue with previous_response_id"
    return (
        f"{kind!r} items are not supported: the gateway carries messages, function and custom tool calls "
        "and their outputs, reasoning and web searches"
    )


def _plain_text(content: str | list[MessagePart], where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for number, part in enumerate(content):
        if isinstance(part, InputText | OutputText):
            texts.append(part.text)
        else:
            raise InvalidChatRequest(f"{where}.content[{number}].type", "system and developer messages take text only")
    return "\n".join(texts)


def _block(part: MessagePart, where: str) -> tuple[ContentBlock, str]:
    """A part as a Claude block, and the client's field a later stage's complaint about it names."""
    if isinstance(part, InputText | OutputText):
        return TextBlock(text=part.text), where
    if isinstance(part, Refusal):
        return TextBlock(text=part.refusal), where
    if isinstance(part, InputImage):
        return _image(part, where), f"{where}.image_url"
    if isinstance(part, InputFile):
        return _document(part, where), f"{where}.file_data"
    if isinstance(part, InputAudio):
        raise InvalidChatRequest(f"{where}.type", "audio input is not supported: Amazon Q takes text and images")
    raise AssertionError(f"unhandled part {part!r}")  # every MessagePart is handled above


def _result_blocks(parts: list[Any], where: str) -> list[ToolResultContentBlock]:
    blocks: list[ToolResultContentBlock] = []
    for number, part in enumerate(parts):
        block, _ = _block(part, f"{where}[{number}]")
        assert isinstance(block, TextBlock | ImageBlock | DocumentBlock)
        blocks.append(block)
    return blocks


def _image(part: InputImage, where: str) -> ImageBlock:
    if part.image_url is None:
        raise InvalidChatRequest(
            f"{where}.file_id", "file ids (Files API) are not supported; send the image inline as a data: URL"
        )
    media_type, data = data_url_parts(part.image_url, f"{where}.image_url", "image")
    return ImageBlock(source=Base64ImageSource(media_type=media_type, data=data))


def _document(part: InputFile, where: str) -> DocumentBlock:
    if part.file_data is None:
        field = "file_url" if part.file_url is not None else "file_id"
        raise InvalidChatRequest(
            f"{where}.{field}",
            "only inline files are supported (file_data as a base64 data: URL): q2api fetches no URL and has no Files API",
        )
    data = part.file_data
    if not data.startswith("data:") and part.filename and part.filename.lower().endswith(".pdf"):
        data = f"data:application/pdf;base64,{data}"  # bare base64 of a named PDF, as some SDK examples send it
    media_type, payload = data_url_parts(data, f"{where}.file_data", "file")
    return DocumentBlock(source=Base64DocumentSource(media_type=media_type, data=payload), title=part.filename)


def _thinking(item: ReasoningItem) -> ThinkingBlock | RedactedThinkingBlock | None:
    texts = [part.text for part in item.summary] + [part.text for part in item.content or ()]
    text = "\n\n".join(text for text in texts if text)
    if text:
        return ThinkingBlock(thinking=text, signature=item.encrypted_content)
    if item.encrypted_content:
        # Another provider's encrypted reasoning: the converter reports it, it has no Amazon Q form.
        return RedactedThinkingBlock(data=item.encrypted_content)
    return None


def stored_item(raw: dict[str, Any], item: InputItem) -> dict[str, Any]:
    """An input item as the store keeps it and `input_items` lists it: typed, with an id and a status."""
    stored = dict(raw)
    kind = stored.setdefault("type", "message")
    if isinstance(item, MessageItem) and isinstance(item.content, str):
        part = (
            {"type": "output_text", "text": item.content, "annotations": []}
            if item.role == "assistant"
            else {"type": "input_text", "text": item.content}
        )
        stored["content"] = [part]
    if not stored.get("id"):
        stored["id"] = new_id(ITEM_ID_PREFIXES.get(kind, "item"))
    if isinstance(item, MessageItem | FunctionCallItem | FunctionCallOutputItem):
        stored.setdefault("status", "completed")
    return stored


def _raw_items(responses: ResponsesRequest) -> list[dict[str, Any]]:
    if responses.input is None:
        return []
    if isinstance(responses.input, str):
        return [{"type": "message", "role": "user", "content": responses.input}]
    return responses.input


def _text_check(responses: ResponsesRequest) -> ResponseCheck | None:
    text_format = responses.text.format if responses.text else None
    if isinstance(text_format, TextFormatJsonObject):
        return response_check(JsonObjectFormat())
    if isinstance(text_format, TextFormatJsonSchema):
        refuse_too_deep(text_format.schema, "text.format.schema")
        spec = JsonSchemaSpec(
            name=text_format.name,
            schema=text_format.schema,
            description=text_format.description,
            strict=text_format.strict,
        )
        try:
            return response_check(JsonSchemaFormat(json_schema=spec))
        except OpenAIError as error:
            # The chat door's check names its own field; the Responses client sent `text.format.schema`.
            problem: str = getattr(error, "problem", error.message)
            raise InvalidChatRequest("text.format.schema", problem) from None
    return None
