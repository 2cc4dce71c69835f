"""Issue 23's wire-fidelity cases, each where a real upstream 400 or a confused user was likely:
tool schemas whose root is not an object, image bytes that are not what Amazon Q takes, tool
names that differ only by case, tool_use ids used twice, the loop guard's way out when the new
instruction shares a message with tool results, and the debug block's current message."""

from __future__ import annotations

import base64

import orjson
import pytest

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import convert_claude_request
from q2api.conversion.debug_summary import conversion_summary
from q2api.conversion.loop_guard import LoopMode, LoopPolicy, detect_tool_loops, loop_refusal
from q2api.conversion.order_guard import validate_conversation
from q2api.conversion.report import FindingKind
from q2api.conversion.tool_schemas import WRAPPED_PROPERTY
from tests.support.converter_helpers import (
    PNG,
    assistant,
    convert,
    current,
    history,
    image,
    kinds,
    request_body,
    table_options,
    text,
    tool_result,
    tool_results_of,
    tool_use,
    user,
)
from tests.support.tool_sessions import SEED_ROUND, session

BLOCK = LoopPolicy(LoopMode.BLOCK)


def valid(conversion):
    assert validate_conversation(conversion.payload) == ()
    return conversion


def specs(conversion):
    return [entry["toolSpecification"] for entry in current(conversion)["userInputMessageContext"]["tools"]]


def tool(name, schema):
    return {"name": name, "description": "does things", "input_schema": schema}


def findings_of(conversion, kind):
    return [finding for finding in conversion.report if finding.kind == kind]


# ------------------------------------------------------------------ tool schemas whose root is not an object


def test_an_empty_tool_schema_is_sent_with_an_object_root():
    conversion = valid(convert([user("go")], tools=[tool("ping", {})]))
    assert specs(conversion)[0]["inputSchema"]["json"] == {"type": "object", "properties": {}}
    [finding] = findings_of(conversion, FindingKind.TOOL_SCHEMA_OBJECT_ROOT)
    assert finding.detail.startswith("tools.0: ping: an empty schema")


def test_a_tool_schema_without_a_type_is_sent_with_an_object_root():
    schema = {"properties": {"path": {"type": "string"}}, "required": ["path"]}
    conversion = valid(convert([user("go")], tools=[tool("Read", schema)]))
    assert specs(conversion)[0]["inputSchema"]["json"] == {"type": "object", **schema}
    assert "tool_schema_object_root" in kinds(conversion)


def test_a_type_list_holding_object_is_sent_as_object():
    schema = {"type": ["object", "null"], "properties": {"a": {"type": "string"}}}
    conversion = valid(convert([user("go")], tools=[tool("t", schema)]))
    assert specs(conversion)[0]["inputSchema"]["json"] == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_an_array_tool_schema_is_wrapped_as_the_value_of_an_object_root():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "items": {"$ref": "#/$defs/path"},
        "$defs": {"path": {"type": "string"}},
    }
    conversion = valid(convert([user("go")], tools=[tool("ReadMany", schema)]))
    sent = specs(conversion)[0]["inputSchema"]["json"]
    assert sent == {
        "$schema": schema["$schema"],
        "$defs": schema["$defs"],  # where the $ref points, still at the root
        "type": "object",
        "properties": {WRAPPED_PROPERTY: {"type": "array", "items": {"$ref": "#/$defs/path"}}},
        "required": [WRAPPED_PROPERTY],
    }
    [finding] = findings_of(conversion, FindingKind.TOOL_SCHEMA_OBJECT_ROOT)
    assert "wrapped" in finding.detail and '{"value": …}' in finding.detail


def test_a_schema_with_an_object_root_is_sent_unchanged():
    schema = {"type": "object", "properties": {}}
    conversion = convert([user("go")], tools=[tool("t", schema)])
    assert specs(conversion)[0]["inputSchema"]["json"] == schema
    assert "tool_schema_object_root" not in kinds(conversion)


def test_the_order_guard_flags_a_schema_root_that_is_not_an_object():
    conversion = convert([user("go")], tools=[tool("t", {"type": "object"})])
    specs(conversion)[0]["inputSchema"]["json"] = {"type": "array"}
    [finding] = validate_conversation(conversion.payload)
    assert finding.kind == FindingKind.FIELD_LIMIT and '"type": "object"' in finding.detail


# ------------------------------------------------------------------ image bytes


def test_a_data_url_prefix_in_image_data_is_stripped():
    conversion = valid(convert([user([image(f"data:image/png;base64,{PNG}"), text("what is this?")])]))
    assert current(conversion)["images"] == [{"format": "png", "source": {"bytes": PNG}}]
    [finding] = findings_of(conversion, FindingKind.IMAGE_DATA_URL_STRIPPED)
    assert finding.message_index == 0
    assert finding.detail.startswith("messages.0.content.0.source.data: the data URL prefix")


def test_a_data_url_type_wins_over_a_media_type_that_disagrees():
    conversion = valid(convert([user([image(f"data:image/jpeg;base64,{PNG}", "image/png"), text("see")])]))
    assert current(conversion)["images"][0]["format"] == "jpeg"
    [finding] = findings_of(conversion, FindingKind.IMAGE_DATA_URL_STRIPPED)
    assert "its type image/jpeg used, not image/png" in finding.detail


@pytest.mark.parametrize(
    "data",
    [
        "not base64 at all!",
        PNG[:-2],  # padding cut off
        PNG[:20] + "\n" + PNG[20:],  # a line break inside
        base64.urlsafe_b64encode(b"\xfb\xff" * 30).decode(),  # the URL-safe alphabet
    ],
)
def test_image_data_that_is_not_base64_is_a_400_naming_its_path(data):
    with pytest.raises(InvalidRequest) as refused:
        convert([user([text("look"), image(data)])])
    assert refused.value.path == "messages.0.content.1.source.data"
    assert "not valid base64" in refused.value.problem


def test_bad_base64_in_a_tool_result_image_names_the_path_inside_the_result():
    bad = tool_result("t1", [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@"}}])
    with pytest.raises(InvalidRequest) as refused:
        convert([user("go"), assistant([tool_use("t1")]), user([bad])])
    assert refused.value.path == "messages.2.content.0.content.0.source.data"


# ------------------------------------------------------------------ tool names that differ only by case


def test_a_history_tool_name_differing_from_an_offered_one_only_by_case_is_that_tool():
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
    messages = [user("go"), assistant([tool_use("t1", "read", {"file_path": "a"})]), user([tool_result("t1")])]
    conversion = valid(convert(messages, tools=[tool("Read", schema)]))
    assert [spec["name"] for spec in specs(conversion)] == ["Read"]  # one spec, not `Read` and `read`
    assert "history_tool_placeholder" not in kinds(conversion)
    assert "tool_name_case_merged" in kinds(conversion)
    # A call the model makes by the history's spelling reaches the client by the offered name.
    assert conversion.tool_names == {"read": "Read"}


def test_two_offered_tools_differing_only_by_case_are_one_tool():
    schema = {"type": "object", "properties": {}}
    conversion = valid(convert([user("go")], tools=[tool("Read", schema), tool("READ", schema)]))
    assert [spec["name"] for spec in specs(conversion)] == ["Read"]
    [finding] = findings_of(conversion, FindingKind.DUPLICATE_TOOL_DROPPED)
    assert finding.detail == "tools.1: READ differs from Read only by case"


def test_history_names_differing_only_by_case_get_one_placeholder():
    messages = [
        user("go"),
        assistant([tool_use("t1", "grep")]),
        user([tool_result("t1")]),
        assistant([tool_use("t2", "Grep")]),
        user([tool_result("t2")]),
    ]
    conversion = valid(convert(messages))
    assert [spec["name"] for spec in specs(conversion)] == ["grep"]
    assert conversion.tool_names == {"Grep": "grep"}


# ------------------------------------------------------------------ tool_use ids used twice


def tool_uses(conversion, position):
    return history(conversion)[position]["assistantResponseMessage"]["toolUses"]


def test_a_tool_use_id_twice_in_one_turn_gets_a_fresh_id_and_keeps_its_own_result():
    messages = [
        user("go"),
        assistant([tool_use("t1", "Bash", {"command": "ls"}), tool_use("t1", "Bash", {"command": "pwd"})]),
        user([tool_result("t1", "a.txt"), tool_result("t1", "/home")]),
    ]
    conversion = valid(convert(messages))
    first, second = tool_uses(conversion, 1)
    assert (first["toolUseId"], first["input"]) == ("t1", {"command": "ls"})
    assert second["toolUseId"] != "t1" and second["input"] == {"command": "pwd"}  # the call and its input kept
    results = tool_results_of(current(conversion))
    assert [(result["toolUseId"], result["content"]) for result in results] == [
        ("t1", [{"text": "a.txt"}]),
        (second["toolUseId"], [{"text": "/home"}]),
    ]
    [finding] = findings_of(conversion, FindingKind.DUPLICATE_TOOL_USE_ID)
    assert (finding.message_index, finding.tool_use_id) == (1, "t1")
    assert conversion.tool_use_ids == {second["toolUseId"]: "t1"}  # mapped back for the client


def test_a_tool_use_id_reused_on_every_turn_is_sent_once_per_call():
    # Some OpenAI-style clients number calls per turn: `call_0` on every turn.
    messages = [user("go")]
    for turn in range(3):
        messages += [
            assistant([tool_use("call_0", "Bash", {"command": f"step {turn}"})]),
            user([tool_result("call_0", f"out {turn}")]),
        ]
    conversion = valid(convert(messages))
    ids = [tool_uses(conversion, position)[0]["toolUseId"] for position in (1, 3, 5)]
    assert ids[0] == "call_0" and len(set(ids)) == 3
    answers = [tool_results_of(history(conversion)[2]["userInputMessage"])[0], tool_results_of(current(conversion))[0]]
    assert [(answer["toolUseId"], answer["content"][0]["text"]) for answer in answers] == [
        (ids[0], "out 0"),
        (ids[2], "out 2"),
    ]
    assert kinds(conversion).count("duplicate_tool_use_id") == 2
    assert set(conversion.tool_use_ids.values()) == {"call_0"}


def test_reused_ids_give_the_same_body_resumed_from_a_checkpoint_as_from_scratch():
    messages = [user("go"), assistant([tool_use("call_0")]), user([tool_result("call_0", "a")])]
    more = [assistant([tool_use("call_0")]), user([tool_result("call_0", "b")])]
    first = convert_claude_request(parse_messages_request(orjson.dumps(request_body(messages))), table_options())
    assert first.checkpoint is not None
    request = parse_messages_request(orjson.dumps(request_body(messages + more)))
    resumed = convert_claude_request(request, table_options(), first.checkpoint)
    scratch = convert_claude_request(request, table_options())
    assert resumed.payload == scratch.payload and resumed.report == scratch.report
    assert resumed.tool_use_ids == scratch.tool_use_ids


def test_the_loop_guard_pairs_reused_ids_with_their_own_turns_results():
    # `call_0` every turn with the same input but a changing result is polling, not a loop.
    messages = [user("watch the build")]
    for turn in range(4):
        messages += [
            assistant([tool_use("call_0", "Bash", {"command": "make status"})]),
            user([tool_result("call_0", f"{turn * 25}% done")]),
        ]
    assert detect_tool_loops(parse_messages_request(orjson.dumps(request_body(messages)))) == ()


# ------------------------------------------------------------------ the loop guard's way out


def looping(after_results):
    """Seed 003's loop, five rounds; the last tool-result message gets `after_results` blocks."""
    messages = session([SEED_ROUND] * 5)
    messages[-1] = user([*messages[-1]["content"], *after_results])
    return parse_messages_request(orjson.dumps(request_body(messages)))


def test_block_mode_lets_the_user_out_with_text_after_the_tool_results_in_the_same_message():
    assert loop_refusal(detect_tool_loops(looping([]), BLOCK), BLOCK) is not None
    way_out = looping([text("index.html is committed. Stop checking and summarise.")])
    assert detect_tool_loops(way_out, BLOCK) == ()
    assert loop_refusal(detect_tool_loops(way_out, BLOCK), BLOCK) is None


def test_new_text_before_the_tool_results_ends_the_loop_too():
    messages = session([SEED_ROUND] * 5)
    messages[-1] = user([text("Stop and summarise."), *messages[-1]["content"]])
    assert detect_tool_loops(parse_messages_request(orjson.dumps(request_body(messages))), BLOCK) == ()


def test_a_claude_code_system_reminder_beside_the_results_is_not_the_user_writing():
    reminder = text("<system-reminder>\nThe TodoWrite tool hasn't been used recently.\n</system-reminder>")
    assert [finding.kind for finding in detect_tool_loops(looping([reminder]), BLOCK)] == ["tool_loop_cycle"]


# ------------------------------------------------------------------ the debug block's current message


def test_the_debug_block_describes_the_current_message_and_its_tool_result_ids():
    messages = [
        user("go"),
        assistant([tool_use("toolu_05"), tool_use("toolu_06")]),
        user([tool_result("toolu_05")]),
        user([tool_result("toolu_06")]),
    ]
    lines = conversion_summary(len(messages), convert(messages)).splitlines()
    footer = lines.index("================================")
    assert lines[footer - 1] == "  Current: USER (toolResults: 2: toolu_05, toolu_06)"
    assert lines[footer - 2] == "  History[1]: ASSISTANT (toolUses: True)"


def test_the_debug_block_says_when_the_current_message_carries_no_results():
    lines = conversion_summary(1, convert([user("hello")])).splitlines()
    assert "  Current: USER (toolResults: 0)" in lines
