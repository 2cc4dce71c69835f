"""Properties of the whole response path over random upstream streams and random read boundaries."""

from __future__ import annotations

from typing import Any

from anthropic.lib.streaming._messages import accumulate_event
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.amazonq.eventstream import encode_event, encode_exception
from tests.support.pipeline import (
    aggregate,
    check_grammar,
    coalesced,
    run_pipeline,
    strip_none,
    text_event,
    tool_event,
)

# A palette of upstream frames; random streams are drawn from it.
PALETTE: list[bytes] = [
    text_event("Hello "),
    text_event("世界🙂 "),
    text_event("<thinking>"),
    text_event("reason"),
    text_event("</thinking>\n\n"),
    text_event("```\n<thinking>quoted</thinking>\n```\n"),
    text_event("`<thi"),
    text_event("nking>`\n"),
    text_event("STO"),
    text_event("P"),
    encode_event("reasoningContentEvent", {"text": "deep "}),
    encode_event("reasoningContentEvent", {"signature": "sig"}),
    encode_event("reasoningContentEvent", {"redactedContent": "cmVk"}),
    tool_event("a", "q_tool"),
    tool_event("a", "q_tool", '{"k": "v'),
    tool_event("a", "q_tool", 'al"}'),
    tool_event("a", "q_tool", stop=True),
    tool_event("b", "other", '{"n": 1}', stop=True),
    encode_event("metadataEvent", {"tokenUsage": {"uncachedInputTokens": 9, "outputTokens": 3}}),
    encode_event("contextUsageEvent", {"contextUsagePercentage": 1.5}),
    encode_event("meteringEvent", {"usage": 1}),
    encode_event("someNewEvent", {"x": 1}),
    encode_event("invalidStateEvent", {"reason": "INVALID_TASK_ASSIST_PLAN", "message": "m"}),
]
FAILURE = encode_exception("InternalServerException", {"message": "boom"})

STREAMS = st.lists(st.sampled_from(PALETTE), max_size=14).flatmap(
    lambda frames: st.tuples(st.just(frames), st.booleans())
)
OPTIONS = st.sampled_from(
    [
        {},
        {"stop_sequences": ["STOP"]},
        {"max_tokens": 6},
        {"thinking_tags": False, "tool_names": {"q_tool": "original_tool"}},
    ]
)


def upstream_of(frames: list[bytes], fails: bool) -> bytes:
    return b"".join(frames) + (FAILURE if fails else b"")


def sdk_accumulate(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The SDK's own accumulator, offline (the loopback tests cover the HTTP layer)."""
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for event in events:
        if event["type"] in ("ping", "error"):
            continue
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    assert snapshot is not None
    return strip_none(snapshot.model_dump())


@settings(max_examples=200, deadline=None)
@given(stream=STREAMS, options=OPTIONS, cuts=st.lists(st.integers(0, 3000), max_size=10))
def test_any_split_of_the_upstream_bytes_gives_the_same_events(stream, options, cuts):
    data = upstream_of(*stream)
    reference = run_pipeline(data, per_frame=True, **options)
    assert run_pipeline(data, cuts=cuts, per_frame=True, **options) == reference
    assert coalesced(run_pipeline(data, cuts=cuts, **options)) == coalesced(reference)


@settings(max_examples=200, deadline=None)
@given(stream=STREAMS, options=OPTIONS, cuts=st.lists(st.integers(0, 3000), max_size=10))
def test_every_stream_is_grammatical_and_the_sdk_and_aggregator_agree(stream, options, cuts):
    events = run_pipeline(upstream_of(*stream), cuts=cuts, **options)
    check_grammar(events)
    accumulated = sdk_accumulate(events)
    if events[-1]["type"] == "error":
        return
    assert accumulated == strip_none(aggregate(events))
    for block in accumulated["content"]:
        if block["type"] == "thinking":
            assert block["signature"]
        if block["type"] == "text":
            assert block["text"].strip()
