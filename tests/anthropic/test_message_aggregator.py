"""The non-streaming aggregator: the exact Message JSON of docs/protocol.md#the-message-json, or the stream's error."""

from __future__ import annotations

import pytest

from q2api.amazonq.eventstream import encode_event, encode_exception
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.message_aggregator import AggregatorState, MessageAggregator
from tests.support.pipeline import run_pipeline, text_event, tool_event

TOOL_BLOCK = {"type": "tool_use", "id": "t", "name": "n", "input": {}}


def aggregated(events):
    aggregator = MessageAggregator()
    for event in events:
        aggregator.add(event)
    return aggregator


def test_full_message_shape():
    events = run_pipeline(
        [
            encode_event("reasoningContentEvent", {"text": "why", "signature": "s1"}),
            text_event("Answer."),
            tool_event("toolu_1", "get_weather", '{"city": "Paris"}', stop=True),
            encode_event("metadataEvent", {"tokenUsage": {"uncachedInputTokens": 120, "outputTokens": 48}}),
        ]
    )
    assert aggregated(events).message() == {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [
            {"type": "thinking", "thinking": "why", "signature": "s1"},
            {"type": "text", "text": "Answer."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 48,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def test_stop_sequence_is_reported():
    message = aggregated(run_pipeline([text_event("abc STOP def")], stop_sequences=["STOP"])).message()
    assert message["stop_reason"] == "stop_sequence" and message["stop_sequence"] == "STOP"
    assert message["content"] == [{"type": "text", "text": "abc "}]


def test_error_event_raises_the_error_with_its_status():
    events = run_pipeline([text_event("partial"), encode_exception("ThrottlingException", {"message": "slow"})])
    aggregator = aggregated(events)
    assert aggregator.state is AggregatorState.FAILED
    with pytest.raises(AnthropicError) as raised:
        aggregator.message()
    assert raised.value.status == 429 and raised.value.error_type == "rate_limit_error"


def test_incomplete_stream_raises():
    events = run_pipeline([text_event("partial")])[:-2]  # no message_delta / message_stop
    with pytest.raises(AnthropicError) as raised:
        aggregated(events).message()
    assert raised.value.status == 500


def test_usage_keys_absent_from_message_delta_survive_from_message_start():
    aggregator = MessageAggregator()
    aggregator.add_all(
        [
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5},
                },
            },
            {"type": "ping"},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "x"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": TOOL_BLOCK},
            {"type": "content_block_stop", "index": 1},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
            {"type": "message_stop"},
        ]
    )
    message = aggregator.message()
    assert message["usage"] == {"input_tokens": 10, "output_tokens": 9, "cache_read_input_tokens": 5}
    assert message["content"] == [
        {"type": "redacted_thinking", "data": "x"},
        {"type": "tool_use", "id": "t", "name": "n", "input": {}},
    ]


def test_tool_input_fragments_are_joined_and_parsed():
    aggregator = MessageAggregator()
    start = run_pipeline([])[0]
    aggregator.add(start)
    aggregator.add({"type": "content_block_start", "index": 0, "content_block": TOOL_BLOCK})
    for piece in ['{"a": ', "[1, ", "2]}"]:
        delta = {"type": "input_json_delta", "partial_json": piece}
        aggregator.add({"type": "content_block_delta", "index": 0, "delta": delta})
    aggregator.add({"type": "content_block_stop", "index": 0})
    aggregator.add({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}})
    aggregator.add({"type": "message_stop"})
    assert aggregator.message()["content"][0]["input"] == {"a": [1, 2]}
