"""Claude stream events → OpenAI chunks and completions: the order, the indices, the endings."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from q2api.anthropic.events import StreamEvent, error_event
from q2api.anthropic.message_aggregator import MessageAggregator
from q2api.frontdoors.chat.reply import ChatChunkEncoder, chat_completion
from q2api.frontdoors.chat.request import ReplyOptions
from q2api.frontdoors.client_schema import compile_client_schema
from q2api.frontdoors.openai_shared import ChatError, ResponseCheck


def start() -> StreamEvent:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_abc",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }


def text_block(index: int, *pieces: str) -> list[StreamEvent]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}} for p in pieces),
        {"type": "content_block_stop", "index": index},
    ]


def thinking_block(index: int, thought: str) -> list[StreamEvent]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": thought}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": index},
    ]


def tool_block(index: int, tool_id: str, *fragments: str) -> list[StreamEvent]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": tool_id, "name": "f", "input": {}},
        },
        *(
            {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": f}}
            for f in fragments
        ),
        {"type": "content_block_stop", "index": index},
    ]


def end(stop_reason: str, output_tokens: int = 7) -> list[StreamEvent]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens, "cache_read_input_tokens": 4},
        },
        {"type": "message_stop"},
    ]


def run(events: list[StreamEvent], options: ReplyOptions, reports: list[str] | None = None) -> list[Any]:
    encoder = ChatChunkEncoder(options, created=123, report=(reports if reports is not None else []).append)
    raw = encoder.encode(events[:3]) + encoder.encode(events[3:]) + encoder.trailer()
    assert raw.endswith(b"\n\n")
    lines = [line.removeprefix(b"data: ") for line in raw.split(b"\n\n") if line]
    return [line.decode() if line == b"[DONE]" else orjson.loads(line) for line in lines]


def deltas(chunks: list[Any]) -> list[dict[str, Any]]:
    return [chunk["choices"][0]["delta"] for chunk in chunks if isinstance(chunk, dict) and chunk.get("choices")]


def test_a_text_stream():
    chunks = run([start(), *text_block(0, "Hel", "lo"), *end("end_turn")], ReplyOptions())
    assert chunks[-1] == "[DONE]"
    assert deltas(chunks) == [{"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}, {}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert {chunk["id"] for chunk in chunks[:-1]} == {"chatcmpl-abc"}
    assert all(chunk["object"] == "chat.completion.chunk" and chunk["created"] == 123 for chunk in chunks[:-1])
    assert all("usage" not in chunk for chunk in chunks[:-1])


def test_usage_chunk_when_asked():
    chunks = run([start(), *text_block(0, "x"), *end("max_tokens")], ReplyOptions(include_usage=True))
    *_, finish, usage, done = chunks
    assert finish["choices"][0]["finish_reason"] == "length" and finish["usage"] is None
    assert usage["choices"] == [] and done == "[DONE]"
    assert usage["usage"] == {
        "prompt_tokens": 14,
        "completion_tokens": 7,
        "total_tokens": 21,
        "prompt_tokens_details": {"cached_tokens": 4},
    }


def test_parallel_tool_calls_get_consecutive_indices():
    events = [
        start(),
        *text_block(0, "Two calls."),
        *tool_block(1, "t1", '{"a"', ":1}"),
        *tool_block(2, "t2", "{}"),
        *end("tool_use"),
    ]
    tool_deltas = [d["tool_calls"][0] for d in deltas(run(events, ReplyOptions())) if "tool_calls" in d]
    assert tool_deltas == [
        {"index": 0, "id": "t1", "type": "function", "function": {"name": "f", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"a"'}},
        {"index": 0, "function": {"arguments": ":1}"}},
        {"index": 1, "id": "t2", "type": "function", "function": {"name": "f", "arguments": ""}},
        {"index": 1, "function": {"arguments": "{}"}},
    ]


def test_legacy_functions_stream_one_call_and_report_the_rest():
    reports: list[str] = []
    events = [start(), *tool_block(0, "t1", "{}"), *tool_block(1, "t2", "{}"), *end("tool_use")]
    chunks = run(events, ReplyOptions(legacy_functions=True), reports)
    calls = [d["function_call"] for d in deltas(chunks) if "function_call" in d]
    assert calls == [{"name": "f", "arguments": ""}, {"arguments": "{}"}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "function_call"
    assert len(reports) == 1


@pytest.mark.parametrize("shown", [True, False])
def test_reasoning_only_when_asked(shown: bool):
    events = [start(), *thinking_block(0, "hmm"), *text_block(1, "ok"), *end("end_turn")]
    reasoning = [
        d["reasoning_content"]
        for d in deltas(run(events, ReplyOptions(show_reasoning=shown)))
        if "reasoning_content" in d
    ]
    assert reasoning == (["hmm"] if shown else [])


def test_an_error_event_is_the_last_chunk_and_no_done_follows():
    events = [start(), *text_block(0, "part"), error_event("overloaded_error", "Amazon Q is overloaded")]
    chunks = run(events, ReplyOptions(include_usage=True))
    assert chunks[-1] == {
        "error": {
            "message": "Amazon Q is overloaded",
            "type": "server_error",
            "param": None,
            "code": "overloaded_error",
        }
    }
    assert "[DONE]" not in chunks


def test_a_reply_failing_the_response_format_check_ends_with_an_error_chunk():
    options = ReplyOptions(check=ResponseCheck("json please"))
    reports: list[str] = []
    chunks = run([start(), *text_block(0, "not ", "json"), *end("end_turn")], options, reports)
    assert chunks[-1]["error"]["code"] == "invalid_response_format" and "[DONE]" not in chunks
    assert reports and "not valid JSON" in reports[0]
    good = run([start(), *text_block(0, '{"a"', ": 1}"), *end("end_turn")], options)
    assert good[-1] == "[DONE]" and good[-2]["choices"][0]["finish_reason"] == "stop"
    # A reply cut by the length limit is reported as such, not judged as JSON.
    cut = run([start(), *text_block(0, '{"a"'), *end("max_tokens")], options)
    assert cut[-2]["choices"][0]["finish_reason"] == "length"


def aggregated(events: list[StreamEvent]) -> dict[str, Any]:
    aggregator = MessageAggregator()
    aggregator.add_all(events)
    return aggregator.message()


def test_a_completion_from_the_aggregated_message():
    message = aggregated(
        [
            start(),
            *thinking_block(0, "hmm"),
            *text_block(1, "Calling."),
            *tool_block(2, "t1", '{"a": 1}'),
            *end("tool_use"),
        ]
    )
    completion = chat_completion(message, ReplyOptions(show_reasoning=True), created=5, report=print)
    assert (
        completion["id"] == "chatcmpl-abc" and completion["object"] == "chat.completion" and completion["created"] == 5
    )
    (choice,) = completion["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": "Calling.",
        "refusal": None,
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}],
        "reasoning_content": "hmm",
    }
    assert completion["usage"]["total_tokens"] == 21


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("tool_use", "tool_calls"),
    ],
)
def test_finish_reasons(stop_reason: str, finish: str):
    message = aggregated([start(), *text_block(0, "x"), *end(stop_reason)])
    assert chat_completion(message, ReplyOptions(), created=0, report=print)["choices"][0]["finish_reason"] == finish


def test_a_completion_that_fails_the_schema_is_an_error():
    check = ResponseCheck("json", compile_client_schema({"type": "object", "required": ["a"]}))
    message = aggregated([start(), *text_block(0, '{"b": 1}'), *end("end_turn")])
    with pytest.raises(ChatError) as caught:
        chat_completion(message, ReplyOptions(check=check), created=0, report=print)
    assert caught.value.status == 422 and caught.value.openai.code == "invalid_response_format"
    assert "'a' is a required property" in caught.value.message
