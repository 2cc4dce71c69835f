"""OpenAI request → Claude request: each mapping rule, and the 400s that name the client's field."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from q2api.anthropic.types import DocumentBlock, ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from q2api.frontdoors.chat.request import DEFAULT_MAX_TOKENS, TranslatedRequest, claude_request
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.types import parse_chat_request

PNG_URL = "data:image/png;base64,iVBORw0KGgo="


def translate(messages: list[dict[str, Any]], **fields: Any) -> TranslatedRequest:
    return claude_request(parse_chat_request(orjson.dumps({"model": "m", "messages": messages, **fields})))


def refusal(messages: list[dict[str, Any]], **fields: Any) -> InvalidChatRequest:
    with pytest.raises(InvalidChatRequest) as caught:
        translate(messages, **fields)
    return caught.value


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def call(call_id: str, name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_leading_system_and_developer_messages_become_the_system_prompt_later_ones_stay_in_place():
    request = translate(
        [
            {"role": "system", "content": "one"},
            {"role": "developer", "content": [{"type": "text", "text": "two"}]},
            user("hi"),
            {"role": "developer", "content": "later"},
        ]
    ).request
    assert request.system == [TextBlock(text="one"), TextBlock(text="two")]
    assert [message.role for message in request.messages] == ["user", "system"]
    assert request.messages[1].content == [TextBlock(text="later")]


def test_defaults_and_limits():
    request = translate([user("hi")]).request
    assert request.max_tokens == DEFAULT_MAX_TOKENS and request.stream is False
    assert request.tools is None and request.tool_choice is None and request.thinking is None
    limited = translate([user("hi")], max_tokens=50, max_completion_tokens=20, stop="END", stream=True).request
    assert limited.max_tokens == 20 and limited.stop_sequences == ["END"] and limited.stream is True


def test_consecutive_tool_messages_answer_one_assistant_turn_in_one_user_turn():
    translated = translate(
        [
            user("go"),
            {"role": "assistant", "content": "calling", "tool_calls": [call("a", arguments='{"x": 1}'), call("b")]},
            {"role": "tool", "tool_call_id": "b", "content": "B"},
            {
                "role": "tool",
                "tool_call_id": "a",
                "content": [{"type": "text", "text": "A1"}, {"type": "text", "text": "A2"}],
            },
            user("thanks"),
        ]
    )
    assistant, results, thanks = translated.request.messages[1:]
    assert assistant.content == [
        TextBlock(text="calling"),
        ToolUseBlock(id="a", name="f", input={"x": 1}),
        ToolUseBlock(id="b", name="f", input={}),
    ]
    assert results.content == [
        ToolResultBlock(tool_use_id="b", content="B"),
        ToolResultBlock(tool_use_id="a", content="A1\nA2"),
    ]
    assert thanks.content == [TextBlock(text="thanks")]
    assert translated.param_for("messages.2.content.1") == "messages[3]"
    assert translated.param_for("messages.1.content.2.input") == "messages[1].tool_calls[1]"


def test_legacy_function_calls_get_ids_their_answers_find_by_name():
    translated = translate(
        [
            user("go"),
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"q": 1}'}},
            {"role": "function", "name": "f", "content": "done"},
        ],
        functions=[{"name": "f", "parameters": {"type": "object"}}],
        function_call={"name": "f"},
    )
    (use,) = translated.request.messages[1].content
    (result,) = translated.request.messages[2].content
    assert isinstance(use, ToolUseBlock) and use.input == {"q": 1}
    assert result == ToolResultBlock(tool_use_id=use.id, content="done")
    assert translated.options.legacy_functions
    assert translated.request.tool_choice.type == "tool" and translated.request.tool_choice.name == "f"
    assert translated.param_for("tools.0") == "functions[0]"


def test_a_function_message_without_a_call_is_refused():
    error = refusal([user("go"), {"role": "function", "name": "f", "content": "x"}])
    assert error.param == "messages[1].name"


@pytest.mark.parametrize(
    ("fields", "kind", "name", "no_parallel"),
    [
        ({"tool_choice": "auto"}, "auto", None, None),
        ({"tool_choice": "none"}, "none", None, None),
        ({"tool_choice": "required"}, "any", None, None),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool", "f", None),
        ({"parallel_tool_calls": False}, "auto", None, True),
        ({"tool_choice": "required", "parallel_tool_calls": False}, "any", None, True),
    ],
)
def test_tool_choice_modes(fields: dict[str, Any], kind: str, name: str | None, no_parallel: bool | None):
    tools = [{"type": "function", "function": {"name": "f", "description": "d"}}]
    request = translate([user("hi")], tools=tools, **fields).request
    assert (request.tool_choice.type, request.tool_choice.name) == (kind, name)
    assert request.tool_choice.disable_parallel_tool_use is no_parallel
    (tool,) = request.tools
    assert tool.name == "f" and tool.description == "d" and tool.input_schema == {"type": "object", "properties": {}}


def test_images_and_files_from_data_urls():
    message = user(
        [
            {"type": "image_url", "image_url": {"url": "data:image/JPEG;base64,/9j/4AAQ"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
        ]
    )
    image, document = translate([message]).request.messages[0].content
    assert isinstance(image, ImageBlock) and (image.source.media_type, image.source.data) == ("image/jpeg", "/9j/4AAQ")
    assert isinstance(document, DocumentBlock) and document.title == "a.pdf"
    assert document.source.media_type == "application/pdf" and document.source.data == "JVBERi0="


@pytest.mark.parametrize(
    ("part", "param", "words"),
    [
        ({"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}, "image_url.url", "does not fetch"),
        ({"type": "image_url", "image_url": {"url": "data:image/png,plain"}}, "image_url.url", "base64"),
        ({"type": "image_url", "image_url": {"url": "data:;base64,AAAA"}}, "image_url.url", "media type"),
        ({"type": "image_url", "image_url": {"url": "ftp://x"}}, "image_url.url", "data: URL"),
        ({"type": "file", "file": {"file_id": "file-1"}}, "file.file_id", "file_data"),
        ({"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}, "type", "audio"),
    ],
)
def test_content_q2api_cannot_send_is_refused_naming_the_part(part: dict[str, Any], param: str, words: str):
    error = refusal([user("hi"), user([{"type": "text", "text": "look"}, part])])
    assert error.param == f"messages[1].content[1].{param}" and words in error.message and error.status == 400


def test_bad_arguments_n_and_unknown_tool_choice_are_refused():
    assert refusal([{"role": "assistant", "tool_calls": [call("a", arguments="[1]")]}]).param == (
        "messages[0].tool_calls[0].function.arguments"
    )
    assert refusal([user("hi")], n=3).param == "n"
    assert translate([user("hi")], n=1).request.messages
    error = refusal(
        [user("hi")],
        tools=[{"type": "function", "function": {"name": "f"}}],
        tool_choice={"type": "function", "function": {"name": "g"}},
    )
    assert error.param == "tool_choice.function.name"
    assert refusal([{"role": "system", "content": "only a system prompt"}]).param == "messages"


@pytest.mark.parametrize(("effort", "budget"), [("minimal", 1024), ("low", 4096), ("medium", 16384), ("high", 32768)])
def test_reasoning_effort_is_a_thinking_budget_and_shows_reasoning(effort: str, budget: int):
    translated = translate([user("hi")], reasoning_effort=effort)
    assert translated.request.thinking.enabled and translated.request.thinking.budget_tokens == budget
    assert translated.options.show_reasoning
    assert not translate([user("hi")], reasoning_effort="none").options.show_reasoning


def test_response_format_adds_an_instruction_and_a_check():
    translated = translate([{"role": "system", "content": "base"}, user("hi")], response_format={"type": "json_object"})
    first, instruction = translated.request.system
    assert first.text == "base" and "JSON" in instruction.text
    check = translated.options.check
    assert check.problem('{"a": 1}') is None
    assert "not a JSON object" in check.problem("[1]") and "not valid JSON" in check.problem("```json\n{}\n```")
    assert translate([user("hi")], response_format={"type": "text"}).options.check is None


def test_stream_options_only_matter_when_streaming():
    assert translate([user("hi")], stream=True, stream_options={"include_usage": True}).options.include_usage
    assert not translate([user("hi")], stream_options={"include_usage": True}).options.include_usage
