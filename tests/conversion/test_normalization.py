"""The `messages normalized:` record: before/after counts and one count per kind of change."""

from __future__ import annotations

from q2api.conversion.normalization import normalization_record
from tests.support.converter_helpers import assistant, convert, image, system, text, tool_result, tool_use, user


def record_of(messages, **fields):
    return normalization_record(len(messages), convert(messages, **fields))


def test_an_unchanged_conversation_has_no_record():
    assert record_of([user("hi"), assistant("hello"), user("bye")]) is None


def test_the_record_counts_messages_both_sides_and_each_kind_of_change():
    messages = [
        user("check"),
        assistant([tool_use("t1"), tool_use("t2")]),
        user([tool_result("t1", "ok")]),  # t2 never answered
        user("and then?"),  # merged into the turn before
        user([tool_result("gone", "late")]),  # orphan
    ]
    record = record_of(messages)
    assert record is not None
    assert (record.before, record.after) == (5, 3)
    assert record.changes == {"merged_user_turn": 2, "orphan_tool_result": 1, "cancelled_tool_result": 1}
    assert record.line() == (
        "messages normalized: before=5 after=3 merged_user_turn=2 orphan_tool_result=1 cancelled_tool_result=1"
    )
    assert record.fields == {"before": 5, "after": 3, **record.changes}


def test_the_system_prompt_pair_and_dropped_images_are_changes_tool_list_repairs_are_not():
    tools = [{"name": "mcp__server__" + "x" * 70, "description": "", "input_schema": {"type": "object"}}]
    messages = [system("env"), user([*[image()] * 11, text("look")])]
    conversion = convert(messages, system="be brief", tools=tools)
    assert {"tool_renamed", "tool_description_placeholder"} <= {str(finding.kind) for finding in conversion.report}
    record = normalization_record(len(messages), conversion)
    assert record is not None
    assert record.changes == {
        "system_turn_as_context": 1,
        "merged_user_turn": 1,
        "system_prompt_as_context": 1,
        "image_dropped": 1,
    }
    assert (record.before, record.after) == (2, 3)
