"""The order guard given a checked run: the findings of a full walk, whatever is broken around the run."""

from __future__ import annotations

import copy
import random
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.order_guard import CheckedRun, checked_run, validate_conversation
from q2api.models.table import resolve_model
from tests.support.conversation_strategies import conversations

OPTIONS = ConversionOptions(conversation_id="conversation", model=resolve_model("claude-sonnet-4-5"))
BROKEN_VALUES: list[Any] = [
    None, "", " ", "x", "a.b", "i" * 65, 0, True, [], {}, [None], {"a": None}, {"text": "t"}, {"json": 1},
    "success", "MANUAL", "png", ("t",), [{"text": None}],
    {"userInputMessage": {"content": "x", "origin": "AI_EDITOR"}},
    {"assistantResponseMessage": {"content": "x", "toolUses": [{"toolUseId": "t", "name": "n", "input": {}}]}},
]  # fmt: skip


def convert(body: dict[str, Any], messages: list[dict[str, Any]], resume: Any = None) -> Any:
    try:
        return convert_claude_request(
            parse_messages_request(orjson.dumps({**body, "messages": messages})), OPTIONS, resume
        )
    except InvalidRequest:
        return None


def with_untrusted_parts_copied(payload: dict[str, Any], run: CheckedRun) -> dict[str, Any]:
    """The body rebuilt around the run: every container but the run's entries is a copy."""
    trusted = {id(entry) for entry in run.entries}
    state = payload["conversationState"]
    new_state = {key: copy.deepcopy(value) for key, value in state.items() if key != "history"}
    if "history" in state:
        new_state["history"] = [entry if id(entry) in trusted else copy.deepcopy(entry) for entry in state["history"]]
    return {**payload, "conversationState": new_state}


def untrusted_containers(value: Any, trusted: set[int]) -> list[Any]:
    if id(value) in trusted:
        return []
    found = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found += untrusted_containers(item, trusted)
    elif isinstance(value, list):
        found.append(value)
        for item in value:
            found += untrusted_containers(item, trusted)
    return found


def break_something(payload: dict[str, Any], run: CheckedRun, rng: random.Random) -> None:
    """One random change anywhere but inside the run's entries (the history list itself may change)."""
    target = rng.choice(untrusted_containers(payload, {id(entry) for entry in run.entries}))
    value = copy.deepcopy(rng.choice(BROKEN_VALUES))
    if isinstance(target, dict):
        keys = list(target)
        choice = rng.random()
        if keys and choice < 0.4:
            target[rng.choice(keys)] = value
        elif keys and choice < 0.7:
            del target[rng.choice(keys)]
        else:
            target[rng.choice([*keys, "toolUses", "images", "modelId", "tools", "toolResults", "origin", None])] = value
    elif target and rng.random() < 0.5:
        del target[rng.randrange(len(target))]
    else:
        target.insert(rng.randrange(len(target) + 1), value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), st.data())
def test_a_checked_run_gives_the_findings_of_a_full_walk(case, data) -> None:
    body, _ = case
    messages = body["messages"]
    earlier = convert(body, messages[: data.draw(st.integers(1, len(messages)), label="earlier")])
    if earlier is None:
        return
    assert validate_conversation(earlier.payload) == ()
    checkpoint = earlier.checkpoint.checked_in(earlier.payload, None)
    conversion = convert(body, messages, checkpoint)
    if conversion is None:
        return
    run = checkpoint.checked
    assert run is not None
    assert validate_conversation(conversion.payload, run) == validate_conversation(conversion.payload) == ()
    rng = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
    broken = with_untrusted_parts_copied(conversion.payload, run)
    for _ in range(rng.randint(1, 4)):
        break_something(broken, run, rng)
    assert guarded(broken, run) == guarded(broken, None)


def guarded(payload: dict[str, Any], run: CheckedRun | None) -> Any:
    """The findings, or the error: some bodies no converter makes still trip the guard itself (an
    unhashable tool name), and they must trip it the same way."""
    try:
        return validate_conversation(payload, run)
    except (TypeError, AttributeError) as error:
        return type(error)


def test_checked_run_reads_only_what_the_run_before_it_did_not_cover() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Grep", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "y"}]},
    ]
    first = convert(body, messages[:3])
    first_run = checked_run(first.payload, first.checkpoint.entries_at, len(first.checkpoint.entries))
    assert first_run.used_names == {"Read"} and first_run.tool_uses_after == {"t1": "Read"}
    second = convert(body, messages, first.checkpoint.checked_in(first.payload, None))
    run = checked_run(second.payload, second.checkpoint.entries_at, len(second.checkpoint.entries), first_run)
    assert run.used_names == {"Read", "Grep"} and run.tool_uses_after == {"t2": "Grep"}
    assert len(run.entries) == 4 and run.entries[:2] == first_run.entries


def test_a_run_that_no_longer_sits_in_the_body_is_ignored() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    conversion = convert(body, messages)
    run = checked_run(conversion.payload, 0, 2)
    moved = copy.deepcopy(conversion.payload)  # equal entries, but not the very same objects
    moved["conversationState"]["history"][1]["assistantResponseMessage"]["toolUses"][0]["name"] = "a.b"
    assert not run.sits_in(moved["conversationState"]["history"])
    assert validate_conversation(moved, run) == validate_conversation(moved) != ()
