"""Conversion checkpoints: a conversion resumed from an earlier request of the conversation is the
conversion from scratch, and the store keeps the right checkpoints within its bounds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.conversion.checkpoints import Checkpoint, CheckpointStore
from q2api.conversion.claude_converter import Conversion, ConversionOptions, convert_claude_request
from q2api.models.table import resolve_model
from tests.support.claude_code_request import claude_code_request
from tests.support.conversation_strategies import conversations


def parsed(body: dict[str, Any], messages: list[dict[str, Any]] | None = None) -> MessagesRequest:
    return parse_messages_request(orjson.dumps(body if messages is None else {**body, "messages": messages}))


def outcome(request: MessagesRequest, options: ConversionOptions, resume: Checkpoint | None = None) -> Any:
    """What a conversion gives, compared whole: the body as sent, the report and the renamed tools."""
    try:
        conversion = convert_claude_request(request, options, resume)
    except InvalidRequest as error:
        return ("refused", error.message)
    return orjson.dumps(conversion.payload), conversion.report, conversion.tool_names


def checkpoint_of(request: MessagesRequest, options: ConversionOptions, resume: Checkpoint | None = None):
    try:
        return convert_claude_request(request, options, resume).checkpoint
    except InvalidRequest:
        return None


MODEL = resolve_model("m")  # the requests below name model "m": the table's default serves it
OPTIONS = ConversionOptions(conversation_id="conversation", model=MODEL, max_images_per_message=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), st.data())
def test_a_conversion_resumed_from_earlier_turns_is_the_conversion_from_scratch(case, data) -> None:
    body, _ = case
    messages = body["messages"]
    # Two earlier requests of the conversation: its first `first` messages, then its first `second`.
    first = data.draw(st.integers(1, len(messages)), label="first")
    second = data.draw(st.integers(first, len(messages)), label="second")
    earlier = checkpoint_of(parsed(body, messages[:first]), OPTIONS)
    if earlier is not None:
        earlier = checkpoint_of(parsed(body, messages[:second]), OPTIONS, earlier) or earlier
    if earlier is None:
        return  # the earlier requests were refused: nothing to resume from
    request = parsed(body)
    scratch = outcome(request, OPTIONS)
    assert outcome(request, OPTIONS, earlier) == scratch
    # Resuming leaves the checkpoint as it was: the same again, and the earlier request itself too.
    assert outcome(request, OPTIONS, earlier) == scratch
    earlier_request = parsed(body, messages[: len(earlier.messages)])
    assert outcome(earlier_request, OPTIONS, earlier) == outcome(earlier_request, OPTIONS)


@given(conversations(), st.sampled_from(["origin", "images", "text_limit"]))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_a_checkpoint_made_with_other_options_is_not_used(case, changed) -> None:
    body, _ = case
    earlier = checkpoint_of(parsed(body), OPTIONS)
    if earlier is None:
        return
    other = {
        "origin": ConversionOptions(
            conversation_id="conversation", model=MODEL, max_images_per_message=4, origin="CLI"
        ),
        "images": ConversionOptions(conversation_id="conversation", model=MODEL, max_images_per_message=2),
        "text_limit": ConversionOptions(
            conversation_id="conversation", model=MODEL, max_images_per_message=4, max_message_chars=9
        ),
    }[changed]
    request = parsed(body)
    assert outcome(request, other, earlier) == outcome(request, other)


def next_turn(body: dict[str, Any], number: int) -> dict[str, Any]:
    """Claude Code's next request: the same conversation, one more tool round, the cache breakpoint moved."""
    messages = [
        {
            **message,
            "content": [{k: v for k, v in block.items() if k != "cache_control"} for block in message["content"]],
        }
        if isinstance(message["content"], list)
        else message
        for message in body["messages"]
    ]
    tool_id = f"toolu_next{number}"
    messages += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "a\nb"},
                {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]
    return {**body, "messages": messages}


def test_claude_code_turns_resume_where_the_last_one_stopped() -> None:
    store = CheckpointStore(max_bytes=1 << 30)
    body = claude_code_request(size_kb=60)
    options = ConversionOptions(conversation_id="session", model=MODEL)
    lengths, resumed_from = [], []
    for number in range(4):
        request = parsed(body)
        resume = store.find("session", request.messages)
        lengths.append(len(request.messages))
        resumed_from.append(None if resume is None else len(resume.messages))
        conversion: Conversion = convert_claude_request(request, options, resume)
        assert outcome(request, options) == (orjson.dumps(conversion.payload), conversion.report, conversion.tool_names)
        assert conversion.checkpoint is not None
        store.keep("session", conversion.checkpoint, len(orjson.dumps(body)), replacing=resume)
        body = next_turn(body, number)
    assert resumed_from == [None, *lengths[:-1]]  # every turn resumed where the one before ended
    assert len(store) == 1  # each checkpoint replaced the one it resumed from


# ------------------------------------------------------------------ the store


def request_of(*texts: str) -> MessagesRequest:
    roles = ["user", "assistant"]
    messages = [{"role": roles[position % 2], "content": text} for position, text in enumerate(texts)]
    return parse_messages_request(orjson.dumps({"model": "m", "max_tokens": 1, "messages": messages}))


def checkpoint(*texts: str) -> Checkpoint:
    made = convert_claude_request(request_of(*texts), ConversionOptions(conversation_id="c", model=MODEL)).checkpoint
    assert made is not None
    return made


def test_find_takes_the_longest_checkpoint_the_messages_start_with() -> None:
    store = CheckpointStore(max_bytes=1000)
    short, long, other = checkpoint("a"), checkpoint("a", "b", "c"), checkpoint("x", "y", "z")
    for kept in (short, long, other):
        store.keep("c", kept, 10, replacing=None)
    assert store.find("c", request_of("a", "b", "c", "d", "e").messages) is long
    assert store.find("c", request_of("a", "b").messages) is short  # the longer one is not a prefix
    assert store.find("c", request_of("a", "B", "c").messages) is short
    assert store.find("c", request_of("q").messages) is None
    assert store.find("another conversation", request_of("a", "b", "c").messages) is None


def test_keep_replaces_the_checkpoint_it_resumed_from() -> None:
    store = CheckpointStore(max_bytes=1000)
    first = checkpoint("a")
    store.keep("c", first, 10, replacing=None)
    store.keep("c", checkpoint("a", "b", "c"), 30, replacing=first)
    assert len(store) == 1 and store.bytes == 30


def test_a_conversation_keeps_its_latest_few_checkpoints() -> None:
    store = CheckpointStore(max_bytes=1000, per_conversation=2)
    kept = [checkpoint(text) for text in "abc"]
    for each in kept:
        store.keep("c", each, 10, replacing=None)
    assert len(store) == 2 and store.bytes == 20
    assert store.find("c", request_of("a").messages) is None  # the oldest went first
    assert store.find("c", request_of("c").messages) is kept[2]


def test_the_least_recently_used_conversations_go_first_past_the_budget() -> None:
    store = CheckpointStore(max_bytes=25)
    store.keep("old", checkpoint("a"), 10, replacing=None)
    store.keep("used", checkpoint("b"), 10, replacing=None)
    assert store.find("old", request_of("a").messages) is not None  # now the most recently used
    store.keep("new", checkpoint("c"), 10, replacing=None)
    assert store.bytes == 20
    assert store.find("used", request_of("b").messages) is None
    assert store.find("old", request_of("a").messages) is not None
    assert store.find("new", request_of("c").messages) is not None


def test_a_request_larger_than_the_budget_is_not_kept() -> None:
    store = CheckpointStore(max_bytes=25)
    store.keep("c", checkpoint("a"), 26, replacing=None)
    assert len(store) == 0 and store.bytes == 0


@pytest.mark.parametrize("budget", [0, 100])
def test_the_store_never_holds_more_than_its_budget(budget: int) -> None:
    store = CheckpointStore(max_bytes=budget)
    for number in range(50):
        store.keep(f"c{number % 7}", checkpoint(str(number)), 9, replacing=None)
        assert store.bytes <= budget
