"""Guards: each Amazon Q rule is detected on a broken payload; loops are found at the tail."""

from __future__ import annotations

import copy

import orjson
import pytest

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.guards import LoopMode, LoopPolicy, check_tool_loops, detect_tool_loops, validate_conversation
from q2api.conversion.report import FindingKind, Severity
from tests.support.converter_helpers import assistant, convert, request_body, tool_result, tool_use, user


def good_payload():
    return copy.deepcopy(
        convert(
            [user("go"), assistant([tool_use("t1", "Bash")]), user([tool_result("t1", "out")])],
            tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
        ).payload
    )


def found(payload):
    return {finding.kind for finding in validate_conversation(payload)}


def test_good_payload_passes():
    assert validate_conversation(good_payload()) == ()


def state(payload):
    return payload["conversationState"]


def current(payload):
    return state(payload)["currentMessage"]["userInputMessage"]


BREAKAGES = {
    "history starts with assistant": (
        lambda p: state(p)["history"].insert(0, {"assistantResponseMessage": {"content": "x"}}),
        FindingKind.INVALID_ORDER,
    ),
    "two user messages in a row": (
        lambda p: state(p)["history"].insert(1, {"userInputMessage": {"content": "x", "origin": "AI_EDITOR"}}),
        FindingKind.INVALID_ORDER,
    ),
    "history ends with user": (lambda p: state(p)["history"].pop(), FindingKind.INVALID_ORDER),
    "result answers nothing": (
        lambda p: current(p)["userInputMessageContext"]["toolResults"][0].update(toolUseId="zzz"),
        FindingKind.UNMATCHED_TOOL_RESULT,
    ),
    "tool use unanswered": (
        lambda p: current(p)["userInputMessageContext"].pop("toolResults"),
        FindingKind.UNANSWERED_TOOL_USE,
    ),
    "duplicate result": (
        lambda p: current(p)["userInputMessageContext"]["toolResults"].append(
            dict(current(p)["userInputMessageContext"]["toolResults"][0])
        ),
        FindingKind.UNMATCHED_TOOL_RESULT,
    ),
    "tool name not listed": (
        lambda p: current(p)["userInputMessageContext"].pop("tools"),
        FindingKind.MISSING_TOOL_SPEC,
    ),
    "tool name too long": (
        lambda p: current(p)["userInputMessageContext"]["tools"][0]["toolSpecification"].update(name="x" * 65),
        FindingKind.FIELD_LIMIT,
    ),
    "tool name bad characters": (
        lambda p: state(p)["history"][1]["assistantResponseMessage"]["toolUses"][0].update(name="a.b"),
        FindingKind.FIELD_LIMIT,
    ),
    "tool use id too long": (
        lambda p: state(p)["history"][1]["assistantResponseMessage"]["toolUses"][0].update(toolUseId="i" * 65),
        FindingKind.FIELD_LIMIT,
    ),
    "empty description": (
        lambda p: current(p)["userInputMessageContext"]["tools"][0]["toolSpecification"].update(description=""),
        FindingKind.FIELD_LIMIT,
    ),
    "description too long": (
        lambda p: current(p)["userInputMessageContext"]["tools"][0]["toolSpecification"].update(
            description="d" * 10_241
        ),
        FindingKind.FIELD_LIMIT,
    ),
    "duplicate tool names": (
        lambda p: current(p)["userInputMessageContext"]["tools"].append(
            current(p)["userInputMessageContext"]["tools"][0]
        ),
        FindingKind.FIELD_LIMIT,
    ),
    "eleven images": (
        lambda p: current(p).update(images=[{"format": "png", "source": {"bytes": "AA"}}] * 11),
        FindingKind.FIELD_LIMIT,
    ),
    "bad image format": (
        lambda p: current(p).update(images=[{"format": "bmp", "source": {"bytes": "AA"}}]),
        FindingKind.FIELD_LIMIT,
    ),
    "a null": (lambda p: current(p).update(images=None), FindingKind.NULL_VALUE),
    "nested null": (
        lambda p: state(p)["history"][1]["assistantResponseMessage"]["toolUses"][0]["input"].update(x=None),
        FindingKind.NULL_VALUE,
    ),
    "model id in history": (
        lambda p: state(p)["history"][0]["userInputMessage"].update(modelId="m"),
        FindingKind.FIELD_LIMIT,
    ),
    "no model id": (lambda p: current(p).pop("modelId"), FindingKind.FIELD_LIMIT),
    "tools in history": (
        lambda p: state(p)["history"][0]["userInputMessage"].update(userInputMessageContext={"tools": []}),
        FindingKind.FIELD_LIMIT,
    ),
    "empty content": (lambda p: current(p).update(content=""), FindingKind.FIELD_LIMIT),
    "no origin": (lambda p: current(p).pop("origin"), FindingKind.FIELD_LIMIT),
    "bad status": (
        lambda p: current(p)["userInputMessageContext"]["toolResults"][0].update(status="ok"),
        FindingKind.FIELD_LIMIT,
    ),
    "empty result content": (
        lambda p: current(p)["userInputMessageContext"]["toolResults"][0].update(content=[]),
        FindingKind.FIELD_LIMIT,
    ),
    "input not an object": (
        lambda p: state(p)["history"][1]["assistantResponseMessage"]["toolUses"][0].update(input="{}"),
        FindingKind.FIELD_LIMIT,
    ),
    "wrong trigger": (lambda p: state(p).update(chatTriggerType="AUTO"), FindingKind.FIELD_LIMIT),
    "first user with results": (
        lambda p: state(p)["history"][0]["userInputMessage"].update(
            userInputMessageContext={
                "toolResults": [{"toolUseId": "a", "content": [{"text": "x"}], "status": "success"}]
            }
        ),
        FindingKind.INVALID_ORDER,
    ),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_each_rule_is_detected(breakage):
    payload = good_payload()
    mutate, kind = BREAKAGES[breakage]
    mutate(payload)
    findings = validate_conversation(payload)
    assert kind in {finding.kind for finding in findings}
    assert all(finding.severity is Severity.ERROR for finding in findings)


def test_missing_state_and_current_message():
    assert found({}) == {FindingKind.INVALID_ORDER}
    assert FindingKind.INVALID_ORDER in found(
        {"conversationState": {"chatTriggerType": "MANUAL", "currentMessage": {}}}
    )


# ---------------------------------------------------------------- loop detection


def request_with_calls(*inputs, name="Bash", after=()):
    messages = [user("start")]
    for number, tool_input in enumerate(inputs):
        messages.append(assistant([tool_use(f"t{number}", name, tool_input)]))
        messages.append(user([tool_result(f"t{number}", "same output")]))
    return parse_messages_request(orjson.dumps(request_body([*messages, *after])))


def test_the_same_call_three_times_is_a_loop():
    findings = detect_tool_loops(request_with_calls(*[{"command": "git status"}] * 3))
    assert [finding.kind for finding in findings] == [FindingKind.TOOL_LOOP_SAME_INPUT]
    assert "3 times" in findings[0].detail and findings[0].severity is Severity.WARNING


def test_two_identical_calls_are_not_a_loop():
    assert (
        detect_tool_loops(request_with_calls({"command": "ls"}, {"command": "git status"}, {"command": "git status"}))
        == ()
    )


def test_key_order_does_not_hide_a_loop():
    findings = detect_tool_loops(request_with_calls({"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 2}))
    assert [finding.kind for finding in findings] == [FindingKind.TOOL_LOOP_SAME_INPUT]


def test_the_threshold_comes_from_the_policy():
    request = request_with_calls(*[{"command": "ls"}] * 4)
    assert detect_tool_loops(request, LoopPolicy(repeat_threshold=5)) == ()
    assert detect_tool_loops(request, LoopPolicy(repeat_threshold=4))


def test_warn_mode_never_raises():
    findings = check_tool_loops(request_with_calls(*[{"command": "ls"}] * 5), LoopPolicy(mode=LoopMode.WARN))
    assert findings


def test_block_mode_is_a_400_that_explains_the_loop():
    with pytest.raises(AnthropicError) as caught:
        check_tool_loops(request_with_calls(*[{"command": "git status"}] * 3), LoopPolicy(mode=LoopMode.BLOCK))
    assert caught.value.status == 400 and caught.value.error_type == "invalid_request_error"
    assert "Bash" in caught.value.message and "same input 3 times" in caught.value.message


def test_polling_with_changing_input_never_blocks():
    request = request_with_calls(*[{"bash_id": "b1", "since": n} for n in range(12)], name="BashOutput")
    findings = check_tool_loops(request, LoopPolicy(mode=LoopMode.BLOCK))
    assert [finding.kind for finding in findings] == [FindingKind.TOOL_LOOP_SAME_NAME]


def test_a_loop_the_conversation_moved_on_from_is_ignored():
    messages = [user("start")]
    for number in range(4):
        messages += [
            assistant([tool_use(f"t{number}", "Bash", {"command": "ls"})]),
            user([tool_result(f"t{number}", "x")]),
        ]
    messages += [assistant([tool_use("r1", "Read", {"file_path": "/a"})]), user([tool_result("r1", "x")])]
    request = parse_messages_request(orjson.dumps(request_body(messages)))
    assert detect_tool_loops(request) == ()


def test_parallel_identical_calls_in_one_turn_count():
    messages = [
        user("go"),
        assistant([tool_use(f"t{n}", "Bash", {"command": "ls"}) for n in range(3)]),
        user([tool_result(f"t{n}") for n in range(3)]),
    ]
    request = parse_messages_request(orjson.dumps(request_body(messages)))
    assert [finding.kind for finding in detect_tool_loops(request)] == [FindingKind.TOOL_LOOP_SAME_INPUT]


def test_no_tool_calls_no_findings():
    assert detect_tool_loops(parse_messages_request(orjson.dumps(request_body([user("hi")])))) == ()


def test_the_policy_is_built_from_settings_values():
    request = request_with_calls(*[{"command": "ls"}] * 3)
    assert check_tool_loops(request, LoopPolicy(LoopMode("warn"), 3))
    assert check_tool_loops(request, LoopPolicy(LoopMode("off"), 3)) == ()
    assert check_tool_loops(request, LoopPolicy(LoopMode("block"), 4)) == ()
    with pytest.raises(AnthropicError):
        check_tool_loops(request, LoopPolicy(LoopMode("block"), 3))


def moved_on(*after):
    return request_with_calls(*[{"command": "ls"}] * 3, after=after)


def test_a_loop_the_conversation_moved_on_from_no_longer_counts():
    block = LoopPolicy(LoopMode.BLOCK, 3)
    # The model answered in text, then the person wrote: every later request would otherwise be refused.
    assert check_tool_loops(moved_on(assistant("I seem stuck."), user("Stop running ls, just summarise.")), block) == ()
    # The person wrote right after the tool results, before the model answered.
    assert check_tool_loops(moved_on(user("stop running ls")), block) == ()
    # Claude Code's role:"system" context between rounds does not end the run.
    with pytest.raises(AnthropicError):
        check_tool_loops(moved_on({"role": "system", "content": "reminder"}), block)
