"""Responses request parsing: the SDK's "easy" message form, every item type, errors that name the item."""

from __future__ import annotations

import orjson
import pytest

from q2api.openai.errors import InvalidChatRequest
from q2api.openai.responses_types import (
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    HostedTool,
    InputImage,
    MessageItem,
    NamespaceTool,
    OtherItem,
    ReasoningItem,
    WebSearchCallItem,
    WebSearchTool,
    input_items,
    parse_responses_request,
    read_tool,
)


def parse(**fields):
    return parse_responses_request(orjson.dumps({"model": "m", **fields}))


def test_unknown_fields_and_nulls_are_accepted():
    request = parse(input="hi", user="u", prompt_cache_key="k", client_metadata={"a": "b"}, store=None, tools=None)
    assert input_items(request) == [MessageItem(role="user", content="hi")]
    assert parse().input is None and input_items(parse()) == []


def test_every_item_type():
    items = input_items(
        parse(
            input=[
                {"role": "user", "content": [{"type": "input_image", "image_url": "data:x", "detail": "auto"}]},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "namespace": "n"},
                {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "r"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "e"},
                {"type": "web_search_call", "id": "ws_1", "action": {"type": "search", "query": "q"}},
                {"type": "file_search_call", "id": "fs_1"},
            ]
        )
    )
    message, call, output, reasoning, search, other = items
    assert isinstance(message, MessageItem) and isinstance(message.content, list)
    assert isinstance(message.content[0], InputImage)
    assert isinstance(call, FunctionCallItem) and call.namespace == "n"
    assert isinstance(output, FunctionCallOutputItem)
    assert isinstance(reasoning, ReasoningItem) and reasoning.summary[0].text == "s"
    assert search == WebSearchCallItem(id="ws_1", action={"type": "search", "query": "q"})
    assert other == OtherItem(type="file_search_call")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": [{"role": "user", "content": [{"type": "input_text"}]}]}, "input[0].content[0].text"),
        ({"input": [{"type": "function_call", "name": "f"}]}, "input[0].call_id"),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}, "input[0].output"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"reasoning": {"effort": "maximal"}}, "reasoning.effort"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
        ({"input": [{"type": "web_search_call", "action": "search"}]}, "input[0].action"),
    ],
)
def test_errors_name_the_field(fields, param):
    with pytest.raises(InvalidChatRequest) as caught:
        input_items(parse(**fields))
    assert caught.value.param == param


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "web_search", "search_context_size": "huge"}, "tools[0].search_context_size"),
        ({"type": "web_search", "filters": {"allowed_domains": "a.test"}}, "tools[0].filters.allowed_domains"),
        ({"type": "web_search_preview", "user_location": {"type": "exact"}}, "tools[0].user_location.type"),
    ],
)
def test_web_search_tool_errors_name_the_field(tool, param):
    with pytest.raises(InvalidChatRequest) as caught:
        read_tool(tool, "tools[0]")
    assert caught.value.param == param


def test_tools_by_type():
    assert isinstance(read_tool({"type": "function", "name": "f"}, "tools[0]"), FunctionTool)
    assert isinstance(read_tool({"type": "namespace", "name": "n", "tools": []}, "tools[0]"), NamespaceTool)
    assert read_tool({"type": "file_search", "vector_store_ids": []}, "tools[0]") == HostedTool(type="file_search")
    for kind in ("web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"):
        tool = read_tool({"type": kind, "search_context_size": "low"}, "tools[1]")
        assert isinstance(tool, WebSearchTool) and tool.type == kind and tool.search_context_size == "low"
    tool = read_tool(
        {"type": "web_search", "filters": {"allowed_domains": ["a.test"]}, "user_location": {"city": "Lyon"}}, "t"
    )
    assert isinstance(tool, WebSearchTool) and tool.filters and tool.filters.allowed_domains == ["a.test"]
    assert tool.user_location and tool.user_location.city == "Lyon"
    with pytest.raises(InvalidChatRequest) as caught:
        read_tool({"name": "f"}, "tools[2]")
    assert caught.value.param == "tools[2].type"


def test_bodies_that_are_not_json_or_utf8():
    for body in (b"{not json", b'{"model": "\xff"}', b"[" * 100_000):
        with pytest.raises(InvalidChatRequest):
            parse_responses_request(body)
