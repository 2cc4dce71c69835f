"""The order guard: each Amazon Q rule is detected on a broken payload."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.conversion.order_guard import validate_conversation
from q2api.conversion.report import FindingKind, Severity
from tests.support.converter_helpers import assistant, convert, tool_result, tool_use, user


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


# Values a converted payload may hold, strings that look like JSON nulls included (the fast
# token check then defers to the walk), and None somewhere or nowhere.
_scalars = st.none() | st.booleans() | st.integers() | st.sampled_from(["x", ":null", "[null]", ",null,", ""])
_documents = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=25,
)


def _holds_none(value) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_holds_none(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_none(item) for item in value)
    return False


@settings(max_examples=300, deadline=None)
@given(document=_documents)
def test_a_null_is_found_wherever_it_is_and_only_then(document) -> None:
    payload = good_payload()
    current(payload)["userInputMessageContext"]["toolResults"][0]["content"] = [{"json": document}]
    assert (FindingKind.NULL_VALUE in found(payload)) == _holds_none(document)
