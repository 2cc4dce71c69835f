"""A Claude Code-shaped request converts cleanly (docs/protocol.md#what-real-clients-send)."""

from __future__ import annotations

import orjson

from q2api.amazonq.types import IDENTIFIER_PATTERN
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.order_guard import validate_conversation
from q2api.conversion.report import Severity
from q2api.models.table import resolve_model
from tests.support.claude_code_request import DEFERRED_TOOL_NAME, MCP_TOOL_NAME, claude_code_request, claude_code_tools
from tests.support.converter_helpers import all_text, all_tool_results, current, history, kinds


def convert_body(body):
    return convert_claude_request(
        request := parse_messages_request(orjson.dumps(body)),
        ConversionOptions(conversation_id="cc-1", model=resolve_model(request.model)),
    )


def test_the_generator_has_the_claude_code_shape():
    body = claude_code_request(size_kb=60)
    size = len(orjson.dumps(body))
    assert 60 * 1024 <= size < 80 * 1024
    assert len(body["system"]) == 3 and sum("cache_control" in block for block in body["system"]) == 2
    assert any(message["role"] == "system" and message["content"] == "" for message in body["messages"])
    assert body["thinking"] == {"type": "adaptive"}
    assert {"output_config", "context_management", "metadata"} <= set(body)
    tools = claude_code_tools()
    assert len(tools) >= 20
    assert all(tool["input_schema"]["$schema"].endswith("2020-12/schema") for tool in tools)
    assert all(tool["input_schema"]["additionalProperties"] is False for tool in tools)
    assert [tool["name"] for tool in tools if tool.get("defer_loading")] == [DEFERRED_TOOL_NAME]
    assert len(MCP_TOOL_NAME) == 70 and MCP_TOOL_NAME in [tool["name"] for tool in tools]
    assert claude_code_request(size_kb=60) == body  # deterministic


def test_claude_code_request_converts_cleanly():
    body = claude_code_request(size_kb=200)
    conversion = convert_body(body)
    assert validate_conversation(conversion.payload) == ()
    assert not [finding for finding in conversion.report if finding.severity is Severity.ERROR]
    # no warnings either: nothing Claude Code sends is lost
    assert not [finding.line() for finding in conversion.report if finding.severity is Severity.WARNING]
    assert conversion.model.q_model_id == "claude-opus-5.5" and conversion.model.known

    names = [entry["toolSpecification"]["name"] for entry in current(conversion)["userInputMessageContext"]["tools"]]
    assert len(names) == len(claude_code_tools())
    assert all(IDENTIFIER_PATTERN.fullmatch(name) for name in names)
    assert conversion.tool_names == {
        next(name for name in names if name not in {t["name"] for t in claude_code_tools()}): MCP_TOOL_NAME
    }

    context = history(conversion)[0]["userInputMessage"]["content"]
    assert "You are Claude Code" in context
    assert (
        "<env>" in all_text(conversion) and "<thinking_mode>enabled</thinking_mode>" in current(conversion)["content"]
    )
    assert current(conversion)["content"].endswith("Thanks. Now run the test suite.")

    expected_results = sum(
        1
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    )
    assert len(all_tool_results(conversion)) == expected_results
    assert "empty_system_turn_dropped" in kinds(conversion)


def test_a_longer_session_stays_a_prefix():
    """Turn N+1's history starts with turn N's history: nothing earlier moves."""
    earlier = convert_body(claude_code_request(size_kb=40))
    later = convert_body(claude_code_request(size_kb=80))
    shared = len(history(earlier)) - 2  # the last pair of `earlier` ends differently
    assert history(later)[:shared] == history(earlier)[:shared]
