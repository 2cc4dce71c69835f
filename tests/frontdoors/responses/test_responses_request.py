"""Responses request (and stored conversation) → the Claude request: items, tools, options, stored items."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from q2api.anthropic.types import (
    ImageBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    WebSearchToolResultBlock,
)
from q2api.frontdoors.openai_shared import DEFAULT_MAX_TOKENS, THINKING_BUDGETS
from q2api.frontdoors.responses.request import TranslatedResponses, claude_request
from q2api.frontdoors.responses.tools import ToolName
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.responses_types import parse_responses_request

PNG = "data:image/png;base64,iVBORw0KGgo="
WEATHER_FUNCTION = {"type": "function", "name": "weather", "parameters": {"type": "object"}}


def translate(history: list[dict[str, Any]] | None = None, **fields: Any) -> TranslatedResponses:
    body = {"model": "m", "input": "hi", **fields}
    return claude_request(parse_responses_request(orjson.dumps(body)), history or [])


def test_a_string_input_with_instructions():
    translated = translate(instructions="Be brief.", max_output_tokens=99, temperature=0.5, stream=True)
    request = translated.request
    assert request.system == [TextBlock(text="Be brief.")]
    assert [(message.role, message.content) for message in request.messages] == [("user", [TextBlock(text="hi")])]
    assert request.max_tokens == 99 and request.temperature == 0.5 and request.stream is True
    assert translate().request.max_tokens == DEFAULT_MAX_TOKENS and translate().request.stream is False
    (stored,) = translated.items
    assert stored["type"] == "message" and stored["role"] == "user" and stored["id"].startswith("msg_")
    assert stored["content"] == [{"type": "input_text", "text": "hi"}] and stored["status"] == "completed"


def test_leading_developer_messages_join_the_system_prompt_and_later_ones_stay_in_place():
    request = translate(
        input=[
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": "q"},
            {"role": "system", "content": [{"type": "input_text", "text": "later"}]},
        ]
    ).request
    assert request.system == [TextBlock(text="rules")]
    assert [message.role for message in request.messages] == ["user", "system"]


def test_calls_and_outputs_share_their_turns_and_reasoning_is_thinking():
    translated = translate(
        input=[
            {"role": "user", "content": "go"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "plan"}],
                "encrypted_content": "sig",
            },
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": '{"x": 1}'},
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": ""},
            {"type": "function_call_output", "call_id": "a", "output": "A"},
            {
                "type": "function_call_output",
                "call_id": "b",
                "output": [{"type": "input_text", "text": "B"}, {"type": "input_image", "image_url": PNG}],
            },
        ]
    )
    _user, assistant, results = translated.request.messages
    assert assistant.role == "assistant" and assistant.content == [
        ThinkingBlock(thinking="plan", signature="sig"),
        ToolUseBlock(id="a", name="f", input={"x": 1}),
        ToolUseBlock(id="b", name="f", input={}),
    ]
    assert results.role == "user" and isinstance(results.content, list)
    first, second = results.content
    assert first == ToolResultBlock(tool_use_id="a", content="A")
    assert isinstance(second, ToolResultBlock) and isinstance(second.content, list)
    assert second.content[0] == TextBlock(text="B") and isinstance(second.content[1], ImageBlock)
    assert translated.param_for("messages.1.content.2") == "input[3]"
    assert translated.param_for("messages.2.content.1.content") == "input[5]"


def test_the_stored_conversation_comes_first():
    history = [
        {"id": "msg_1", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "earlier"}]},
        {"id": "msg_2", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
    ]
    translated = translate(history, input="now")
    texts = [
        block.text
        for message in translated.request.messages
        for block in message.content
        if isinstance(block, TextBlock)
    ]  # type: ignore[union-attr]
    assert texts == ["earlier", "answer", "now"]
    assert translated.param_for("messages.0") == "previous_response_id"
    assert len(translated.items) == 1  # only this request's input is stored with it


def test_function_and_namespace_tools_and_tool_choice():
    tools = [
        {"type": "function", "name": "f", "description": "F.", "parameters": {"type": "object"}, "strict": True},
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "g"}]},
    ]
    translated = translate(tools=tools, tool_choice={"type": "function", "name": "f"}, parallel_tool_calls=False)
    request = translated.request
    assert [(tool.name, tool.description) for tool in request.tools or ()] == [("f", "F."), ("ns__g", None)]
    assert request.tools and request.tools[1].input_schema == {"type": "object", "properties": {}}
    assert translated.options.tool_names["ns__g"] == ToolName("g", "ns")
    assert request.tool_choice is not None
    assert (request.tool_choice.type, request.tool_choice.name, request.tool_choice.disable_parallel_tool_use) == (
        "tool",
        "f",
        True,
    )
    assert translate(tools=tools, tool_choice="required").request.tool_choice.type == "any"  # type: ignore[union-attr]
    assert (
        translate(
            tools=tools, tool_choice={"type": "function", "name": "g", "namespace": "ns"}
        ).request.tool_choice.name
        == "ns__g"
    )  # type: ignore[union-attr]


def test_reasoning_effort_summary_include_and_text_format():
    translated = translate(
        reasoning={"effort": "medium", "summary": "auto"},
        include=["reasoning.encrypted_content"],
        text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object", "required": ["a"]}}},
    )
    assert translated.request.thinking is not None
    assert translated.request.thinking.budget_tokens == THINKING_BUDGETS["medium"]
    assert translated.options.summaries and translated.options.encrypted_reasoning
    check = translated.options.check
    assert check is not None and check.problem('{"a": 1}') is None and check.problem("{}") is not None
    assert "JSON schema" in (translated.request.system or [TextBlock(text="")])[-1].text  # type: ignore[index, union-attr]
    assert translate(reasoning={"effort": "none"}).request.thinking is None
    assert translate(text={"format": {"type": "json_object"}}).options.check is not None


def test_web_search_tools_become_the_claude_web_search_tool():
    tool = {
        "type": "web_search",
        "filters": {"allowed_domains": ["docs.python.org"]},
        "user_location": {"type": "approximate", "city": "Lyon", "country": "FR", "timezone": "Europe/Paris"},
        "search_context_size": "high",
        "external_web_access": False,
    }
    translated = translate(tools=[WEATHER_FUNCTION, tool], include=["web_search_call.action.sources"])
    (_, search) = translated.request.tools or ()
    assert (search.name, search.type, search.input_schema) == ("web_search", "web_search_20250305", None)
    assert search.allowed_domains == ["docs.python.org"]
    assert search.user_location == {"type": "approximate", "city": "Lyon", "country": "FR", "timezone": "Europe/Paris"}
    assert translated.options.search_sources is True
    assert translated.param_for("tools.1.allowed_domains.0") == "tools[1].filters.allowed_domains[0]"
    assert translate(tools=[tool]).options.search_sources is False
    for kind in ("web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"):
        (preview,) = translate(tools=[{"type": kind}]).request.tools or ()
        assert (preview.name, preview.type, preview.allowed_domains, preview.user_location) == (
            "web_search",
            "web_search_20250305",
            None,
            None,
        )
    choice = translate(tools=[tool], tool_choice={"type": "web_search"}, parallel_tool_calls=False).request.tool_choice
    assert choice is not None and (choice.type, choice.name, choice.disable_parallel_tool_use) == (
        "tool",
        "web_search",
        True,
    )


def test_an_earlier_web_search_call_is_the_claude_doors_search_blocks():
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "rust release", "sources": [{"type": "url", "url": "https://r.test/1"}]},
    }
    failed = {"type": "web_search_call", "id": "ws_2", "status": "failed", "action": {"type": "search", "query": "x"}}
    unsourced = {"type": "web_search_call", "id": "ws_3", "status": "completed", "action": {"type": "search"}}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Found it."}]}
    translated = translate(input=[{"role": "user", "content": "news?"}, search, failed, unsourced, answer])
    (_, turn) = translated.request.messages
    blocks = turn.content
    assert isinstance(blocks, list)
    assert [type(block).__name__ for block in blocks] == [
        "ServerToolUseBlock",
        "WebSearchToolResultBlock",
        "ServerToolUseBlock",
        "WebSearchToolResultBlock",
        "ServerToolUseBlock",
        "TextBlock",
    ]
    call, result, failed_call, failed_result, bare = blocks[:5]
    assert isinstance(call, ServerToolUseBlock) and call.input == {"query": "rust release"}
    assert isinstance(result, WebSearchToolResultBlock) and result.tool_use_id == call.id
    assert result.content == [{"type": "web_search_result", "url": "https://r.test/1"}]
    assert isinstance(failed_result, WebSearchToolResultBlock) and isinstance(failed_call, ServerToolUseBlock)
    assert failed_result.content == {"type": "web_search_tool_result_error", "error_code": "unavailable"}
    assert isinstance(bare, ServerToolUseBlock) and bare.input == {}
    assert translated.param_for("messages.1.content.2") == "input[2]"
    assert translated.items[1]["id"] == "ws_1"  # stored as sent
    assert call.id == "srvtoolu_ws_1"  # the same history converts to the same request


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}]},
            "input[0].content[0].file_id",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]},
            "input[0].content[0].file_id",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
            "input[0].content[0].type",
        ),
        ({"tools": [{"type": "code_interpreter"}]}, "tools[0].type"),
        ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice.type"),
        ({"tools": [{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}]}, "tools[0].tools[0].type"),
        ({"tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice.type"),
        ({"prompt": {"id": "p"}}, "prompt"),
        ({"metadata": {"k": "v" * 513}}, "metadata.k"),
        ({"model": None}, "model"),
    ],
)
def test_what_cannot_be_carried_is_refused_naming_the_field(fields: dict[str, Any], param: str):
    with pytest.raises(InvalidChatRequest) as caught:
        translate(**fields)
    assert caught.value.param == param and caught.value.status == 400


def test_a_continuation_may_leave_the_model_to_its_previous_response():
    body = parse_responses_request(orjson.dumps({"input": "more", "previous_response_id": "resp_1"}))
    history = [{"type": "message", "role": "user", "content": "hi"}]
    assert claude_request(body, history, previous_model="claude-haiku-5-5").request.model == "claude-haiku-5-5"
