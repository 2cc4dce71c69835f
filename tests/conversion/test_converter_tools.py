"""Tool specs: names, descriptions, schemas, history coverage, server tools, tool_choice."""

from __future__ import annotations

import pytest

from q2api.amazonq.types import IDENTIFIER_PATTERN, MAX_TOOL_DESCRIPTION_LENGTH
from q2api.conversion.identifiers import shortened_identifier
from q2api.conversion.order_guard import validate_conversation
from tests.support.converter_helpers import assistant, convert, current, history, kinds, tool_result, tool_use, user

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
LONG_NAME = "mcp__some_really_long_server_name__and_an_even_longer_tool_name_here_x"


def tool(name, description="does things", schema=SCHEMA, **extra):
    return {"name": name, "description": description, "input_schema": schema, **extra}


def specs(conversion):
    return [
        entry["toolSpecification"]
        for entry in (current(conversion).get("userInputMessageContext") or {}).get("tools", [])
    ]


def test_tools_go_on_the_current_message_only():
    conversion = convert([user("a"), assistant("b"), user("c")], tools=[tool("Bash")])
    assert [spec["name"] for spec in specs(conversion)] == ["Bash"]
    assert "userInputMessageContext" not in history(conversion)[0]["userInputMessage"]
    assert specs(conversion)[0]["inputSchema"] == {"json": SCHEMA}


def test_long_and_invalid_names_are_shortened_reversibly_and_deterministically():
    assert len(LONG_NAME) > 64
    messages = [user("go"), assistant([tool_use("t1", LONG_NAME, {"command": "x"})]), user([tool_result("t1")])]
    first = convert(messages, tools=[tool(LONG_NAME), tool("server.tool")])
    second = convert(messages, tools=[tool(LONG_NAME), tool("server.tool")])
    names = [spec["name"] for spec in specs(first)]
    assert names == [spec["name"] for spec in specs(second)]  # stable across turns
    assert all(IDENTIFIER_PATTERN.fullmatch(name) for name in names)
    assert first.tool_names == {names[0]: LONG_NAME, names[1]: "server.tool"}
    assert history(first)[1]["assistantResponseMessage"]["toolUses"][0]["name"] == names[0]
    assert names[0].startswith("mcp__some_really_long")
    assert validate_conversation(first.payload) == ()
    assert "tool_renamed" in kinds(first)


def test_similar_names_do_not_collide():
    assert shortened_identifier("a.b") != shortened_identifier("a:b")
    assert shortened_identifier(LONG_NAME + "1") != shortened_identifier(LONG_NAME + "2")


def test_valid_names_are_untouched():
    conversion = convert([user("go")], tools=[tool("mcp__github__get_issue")])
    assert conversion.tool_names == {}
    assert specs(conversion)[0]["name"] == "mcp__github__get_issue"


def test_empty_description_gets_a_placeholder():
    conversion = convert([user("go")], tools=[tool("A", ""), {"name": "B", "input_schema": SCHEMA}])
    assert [spec["description"] for spec in specs(conversion)] == ["The A tool.", "The B tool."]
    assert kinds(conversion).count("tool_description_placeholder") == 2


def test_long_description_is_truncated_and_moved_into_context():
    description = "start " + "x" * 12_000 + " end-marker"
    conversion = convert([user("go")], tools=[tool("Big", description)])
    [spec] = specs(conversion)
    assert len(spec["description"]) <= MAX_TOOL_DESCRIPTION_LENGTH and spec["description"].startswith("start ")
    context = history(conversion)[0]["userInputMessage"]["content"]
    assert "end-marker" in context and "Big" in context
    assert validate_conversation(conversion.payload) == ()
    assert "tool_description_truncated" in kinds(conversion)


def test_schema_nulls_are_removed_without_touching_clean_schemas():
    dirty = {"type": "object", "properties": {"a": {"type": "string", "default": None}}, "required": None}
    conversion = convert([user("go")], tools=[tool("Dirty", schema=dirty), tool("Clean")])
    dirty_spec, clean_spec = specs(conversion)
    assert dirty_spec["inputSchema"]["json"] == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert clean_spec["inputSchema"]["json"] == SCHEMA
    assert kinds(conversion).count("tool_schema_cleaned") == 1


def test_every_history_tool_name_is_listed():
    conversion = convert(
        [user("go"), assistant([tool_use("t1", "OldTool")]), user([tool_result("t1")]), assistant("ok"), user("next")],
        tools=[tool("Bash")],
    )
    names = [spec["name"] for spec in specs(conversion)]
    assert names == ["Bash", "OldTool"]
    assert validate_conversation(conversion.payload) == ()
    assert "history_tool_placeholder" in kinds(conversion)


def test_history_tools_listed_even_without_any_tools():
    """Compaction requests drop `tools` while tool history remains."""
    conversion = convert([user("go"), assistant([tool_use("t1", "Read")]), user([tool_result("t1")])])
    assert [spec["name"] for spec in specs(conversion)] == ["Read"]
    assert validate_conversation(conversion.payload) == ()


def test_server_tools_but_web_search_are_dropped_and_reported():
    # Issue 21: the web search server tool is offered as the `web_search` tool the gateway runs;
    # the tool search tools are left out (every tool is offered up front); a server tool the door
    # refuses (code execution) is reported if it reaches the converter at all (a replayed capture).
    conversion = convert(
        [user("go")],
        tools=[
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
            {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
            {"type": "code_execution_20250522", "name": "code_execution"},
            tool("Bash"),
        ],
    )
    assert [spec["name"] for spec in specs(conversion)] == ["web_search", "Bash"]
    assert kinds(conversion).count("server_tool_dropped") == 2
    assert conversion.web_search is not None and conversion.web_search.max_uses == 5


def test_anthropic_client_tools_are_offered_with_their_documented_schemas():
    # Issue 32: bash, the text editor and memory have no schema in the request (Anthropic's models know
    # them); Amazon Q's are given the one Anthropic documents, and the client runs the calls.
    conversion = convert(
        [user("go")],
        tools=[
            {"type": "bash_20250124", "name": "bash"},
            {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 1000},
            {"type": "text_editor_20250124", "name": "str_replace_editor"},
            {"type": "memory_20250818", "name": "memory", "input_examples": [{"command": "view", "path": "/memories"}]},
        ],
    )
    offered = {spec["name"]: spec for spec in specs(conversion)}
    assert list(offered) == ["bash", "str_replace_based_edit_tool", "str_replace_editor", "memory"]
    assert set(offered["bash"]["inputSchema"]["json"]["properties"]) == {"command", "restart"}
    editor = offered["str_replace_based_edit_tool"]["inputSchema"]["json"]
    assert editor["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert"]
    assert "insert_text" in editor["properties"]
    early = offered["str_replace_editor"]["inputSchema"]["json"]
    assert "undo_edit" in early["properties"]["command"]["enum"] and "insert_text" not in early["properties"]
    assert '{"command":"view","path":"/memories"}' in offered["memory"]["description"]
    assert "server_tool_dropped" not in kinds(conversion)


def test_custom_type_tool_is_kept():
    conversion = convert([user("go")], tools=[tool("Bash", type="custom")])
    assert [spec["name"] for spec in specs(conversion)] == ["Bash"]


def test_duplicate_tool_names_are_dropped():
    conversion = convert([user("go")], tools=[tool("Bash"), tool("Bash", "second")])
    assert [spec["description"] for spec in specs(conversion)] == ["does things"]
    assert "duplicate_tool_dropped" in kinds(conversion)


def test_tool_choice_none_offers_no_tools_but_keeps_history_valid():
    conversion = convert(
        [user("go"), assistant([tool_use("t1", "Bash")]), user([tool_result("t1")])],
        tools=[tool("Bash"), tool("Read")],
        tool_choice={"type": "none"},
    )
    [spec] = specs(conversion)
    assert spec["name"] == "Bash" and "not offered" in spec["description"]
    assert validate_conversation(conversion.payload) == ()
    assert "tool_choice_none" in kinds(conversion)


def test_tool_choice_none_without_history_sends_no_tools():
    conversion = convert([user("go")], tools=[tool("Bash")], tool_choice={"type": "none"})
    assert "userInputMessageContext" not in current(conversion)


@pytest.mark.parametrize(
    ("tool_choice", "wanted"),
    [
        ({"type": "any"}, "tool_choice 'any'"),
        ({"type": "tool", "name": "Read"}, "tool 'Read'"),
        ({"type": "auto", "disable_parallel_tool_use": True}, "disable_parallel_tool_use"),
    ],
)
def test_a_tool_choice_amazon_q_cannot_enforce_is_reported_and_all_tools_still_go(tool_choice, wanted):
    conversion = convert([user("go")], tools=[tool("Bash"), tool("Read")], tool_choice=tool_choice)
    assert [spec["name"] for spec in specs(conversion)] == ["Bash", "Read"]
    [finding] = [finding for finding in conversion.report if finding.kind == "tool_choice_ignored"]
    assert wanted in finding.detail and finding.severity == "warning"


def test_tool_choice_auto_is_not_reported():
    conversion = convert([user("go")], tools=[tool("Bash")], tool_choice={"type": "auto"})
    assert "tool_choice_ignored" not in kinds(conversion)


@pytest.mark.parametrize(
    ("choice", "asked"),
    [
        ({"type": "any"}, "Call one of your tools in this reply."),
        ({"type": "tool", "name": "Bash"}, "Call the tool Bash in this reply."),
        ({"type": "auto", "disable_parallel_tool_use": True}, "Call at most one tool in this reply."),
        ({"type": "auto"}, None),
    ],
    ids=["any", "named", "no-parallel", "auto"],
)
def test_a_tool_choice_amazon_q_cannot_enforce_is_asked_of_the_model(choice: dict, asked: str | None):
    conversion = convert([user("go")], tools=[tool("Bash")], tool_choice=choice)
    content = current(conversion)["content"]
    if asked is None:
        assert content == "go"
    else:
        assert content == f"go\n\n{asked}"
