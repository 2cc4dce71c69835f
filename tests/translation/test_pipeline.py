"""Upstream bytes → decoder → translator → SSE → the official `anthropic` SDK over loopback.

Every scenario checks three things: the SDK's own accumulator builds the
expected final message from our SSE bytes, the non-streaming aggregator builds
the very same message from the same events, and the translator's status
(stop reason, findings) agrees.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import anthropic
import orjson
import pytest
from anthropic._streaming import SSEDecoder

from q2api.amazonq.eventstream import encode_error, encode_event, encode_exception
from q2api.anthropic.sse import encode_sse
from q2api.translation.pump import ReplyPump
from tests.support.pipeline import (
    MODEL,
    aggregate,
    coalesced,
    make_translator,
    run_pipeline,
    sdk,
    strip_none,
    text_event,
    tool_event,
)


def final_via_sdk(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The SDK's final message, checked against the aggregator's, as a plain dict."""
    message = strip_none(sdk().final_message(events).model_dump())
    assert message == strip_none(aggregate(events)), "streamed and non-streamed replies differ"
    return message


def expected(content: list[dict[str, Any]], stop_reason: str, **usage: int) -> dict[str, Any]:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "usage": {
            "input_tokens": usage.get("input_tokens", 42),
            "output_tokens": usage["output_tokens"],
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
        },
    }


def without_signatures(message: dict[str, Any]) -> dict[str, Any]:
    for block in message["content"]:
        if block["type"] == "thinking":
            assert block.pop("signature"), "a thinking block must carry a signature"
    return message


def metadata(input_tokens: int = 7, output_tokens: int = 11, **extra: int) -> bytes:
    usage = {"uncachedInputTokens": input_tokens, "outputTokens": output_tokens, "totalTokens": 0, **extra}
    return encode_event("metadataEvent", {"tokenUsage": usage})


# ---------------------------------------------------------------------- text


def test_plain_text_without_initial_response():
    upstream = [text_event("Hello"), text_event(", world"), text_event("!"), metadata()]
    message = final_via_sdk(run_pipeline(upstream))
    content = [{"type": "text", "text": "Hello, world!"}]
    assert message == expected(content, "end_turn", input_tokens=7, output_tokens=11)


def test_leading_metadata_and_initial_response_events_do_not_precede_message_start():
    upstream = [
        encode_event("initial-response", {}),
        encode_event("messageMetadataEvent", {"conversationId": "c1", "utteranceId": "u1"}),
        text_event("Hi"),
    ]
    events = run_pipeline(upstream)
    assert events[0]["type"] == "message_start"
    assert [e["type"] for e in events].count("message_start") == 1
    assert final_via_sdk(events)["content"] == [{"type": "text", "text": "Hi"}]


CJK_PIECES = ["你好，", "世界！", "🙂👍🏽", " héllo ", "日本語のテキスト", "🇫🇷 done"]


def cjk_stream() -> bytes:
    return b"".join(text_event(piece) for piece in CJK_PIECES)


def test_cjk_and_emoji_survive_every_single_byte_split_of_the_stream():
    data = cjk_stream()
    reference = run_pipeline(data, per_frame=True)
    batched = coalesced(reference)
    for cut in range(1, len(data)):
        assert run_pipeline(data, cuts=[cut], per_frame=True) == reference, f"split at byte {cut}"
        assert coalesced(run_pipeline(data, cuts=[cut])) == batched, f"split at byte {cut}"
    message = final_via_sdk(reference)
    assert message["content"] == [{"type": "text", "text": "".join(CJK_PIECES)}]


def test_cjk_and_emoji_split_into_single_bytes_reach_the_sdk_intact():
    data = cjk_stream()
    events = run_pipeline(data, cuts=range(len(data)))
    assert final_via_sdk(events)["content"] == [{"type": "text", "text": "".join(CJK_PIECES)}]


def test_unknown_and_ignorable_events_are_ignored_and_counted():
    translator = make_translator()
    upstream = [
        text_event("a"),
        encode_event("weirdFutureEvent", {"x": 1}),
        encode_event("codeReferenceEvent", {"references": []}),
        encode_event("followupPromptEvent", {"followupPrompt": {"content": "more?"}}),
        encode_event("meteringEvent", {"unit": "credit", "usage": 0.1}),
        text_event("b"),
    ]
    message = final_via_sdk(run_pipeline(upstream, translator=translator))
    assert message["content"] == [{"type": "text", "text": "ab"}]
    assert translator.ignored_events == {
        "weirdFutureEvent": 1,
        "codeReferenceEvent": 1,
        "followupPromptEvent": 1,
    }
    # The metering event is read now (issue 21): the reply's credits, not an ignored event.
    assert translator.credits == 0.1


# ---------------------------------------------------------------------- thinking


def test_thinking_tags_split_across_frames_become_a_thinking_block():
    upstream = [
        text_event("<thi"),
        text_event("nking>Let me"),
        text_event(" think.</th"),
        text_event("inking>\n\n"),
        text_event("The answer is 4."),
    ]
    message = without_signatures(final_via_sdk(run_pipeline(upstream)))
    assert message["content"] == [
        {"type": "thinking", "thinking": "Let me think."},
        {"type": "text", "text": "The answer is 4."},
    ]


def test_thinking_tags_inside_code_are_text():
    fenced = "Example:\n```xml\n<thinking>not real</thinking>\n```\n"
    inline = "Write `<thinking>` to start."
    upstream = [text_event(fenced[:20]), text_event(fenced[20:]), text_event(inline)]
    message = final_via_sdk(run_pipeline(upstream))
    assert message["content"] == [{"type": "text", "text": fenced + inline}]


def test_reasoning_content_events_become_thinking_and_redacted_thinking():
    upstream = [
        encode_event("reasoningContentEvent", {"text": "step 1, "}),
        encode_event("reasoningContentEvent", {"text": "step 2"}),
        encode_event("reasoningContentEvent", {"signature": "sig-from-upstream"}),
        encode_event("reasoningContentEvent", {"redactedContent": "b3BhcXVl"}),
        text_event("Done."),
    ]
    message = final_via_sdk(run_pipeline(upstream))
    assert message["content"] == [
        {"type": "thinking", "thinking": "step 1, step 2", "signature": "sig-from-upstream"},
        {"type": "redacted_thinking", "data": "b3BhcXVl"},
        {"type": "text", "text": "Done."},
    ]


# ---------------------------------------------------------------------- tools


def test_two_tools_in_a_row_with_names_restored():
    upstream = [
        text_event("Checking both."),
        tool_event("tooluse_a", "get_weather", '{"city": "Par'),
        tool_event("tooluse_a", "get_weather", 'is"}', stop=True),
        tool_event("tooluse_b", "mcp__srv__very_long_tool_q1", '{"q": [1, 2, {"x": null}]}'),
        tool_event("tooluse_b", "mcp__srv__very_long_tool_q1", stop=True),
        metadata(100, 50, cacheReadInputTokens=900, cacheWriteInputTokens=30),
    ]
    tool_names = {"mcp__srv__very_long_tool_q1": "mcp__server__a_very_long_original_tool_name"}
    translator = make_translator(tool_names=tool_names)
    message = final_via_sdk(run_pipeline(upstream, translator=translator))
    assert message == expected(
        [
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "tooluse_a", "name": "get_weather", "input": {"city": "Paris"}},
            {
                "type": "tool_use",
                "id": "tooluse_b",
                "name": "mcp__server__a_very_long_original_tool_name",
                "input": {"q": [1, 2, {"x": None}]},
            },
        ],
        "tool_use",
        input_tokens=100,
        output_tokens=50,
        cache_read_input_tokens=900,
        cache_creation_input_tokens=30,
    )
    assert translator.stop_reason == "tool_use"
    assert translator.findings == []


def test_tool_with_input_less_first_frame_and_empty_input():
    upstream = [
        tool_event("t1", "list_files"),
        tool_event("t1", "list_files", '{"path": "."}'),
        tool_event("t1", "list_files", stop=True),
        tool_event("t2", "no_args"),
        tool_event("t2", "no_args", stop=True),
    ]
    message = final_via_sdk(run_pipeline(upstream))
    assert message["content"] == [
        {"type": "tool_use", "id": "t1", "name": "list_files", "input": {"path": "."}},
        {"type": "tool_use", "id": "t2", "name": "no_args", "input": {}},
    ]
    assert message["stop_reason"] == "tool_use"


def test_tool_input_in_fifty_fragments():
    original = {
        "file_path": "/tmp/ünïcode 文件.py",
        "content": 'print("hello")\n' * 20 + '# \\ backslash " quote \t tab 🙂',
        "flags": [True, False, None, 1.5, -3],
    }
    text = orjson.dumps(original).decode()
    bounds = [len(text) * i // 50 for i in range(51)]
    fragments = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert len(fragments) == 50 and all(fragments)
    upstream = [tool_event("w1", "Write")]
    upstream += [tool_event("w1", "Write", fragment) for fragment in fragments]
    upstream.append(tool_event("w1", "Write", stop=True))
    message = final_via_sdk(run_pipeline(upstream))
    assert message["content"] == [{"type": "tool_use", "id": "w1", "name": "Write", "input": original}]


def test_tool_input_given_as_an_object_is_accepted():
    upstream = [tool_event("k1", "Read", {"file_path": "/a"}, stop=True)]
    assert final_via_sdk(run_pipeline(upstream))["content"] == [
        {"type": "tool_use", "id": "k1", "name": "Read", "input": {"file_path": "/a"}}
    ]


def test_truncated_tool_input_is_withheld_and_the_reply_ends_with_max_tokens():
    translator = make_translator()
    upstream = [
        text_event("Writing the file."),
        tool_event("w1", "Write"),
        tool_event("w1", "Write", '{"file_path": "/a.py", "content": "def f():\\n    ret'),
    ]  # the stream ends: no stop, input cut mid-string
    message = final_via_sdk(run_pipeline(upstream, translator=translator))
    assert message["content"] == [{"type": "text", "text": "Writing the file."}]
    assert message["stop_reason"] == "max_tokens"
    [finding] = translator.findings
    assert finding.kind == "tool_input_truncated"
    assert finding.data["tool_use_id"] == "w1"
    assert finding.data["verdict"] == "truncated"
    assert finding.data["stop_received"] is False


def test_invalid_tool_input_at_stop_is_withheld_not_turned_into_an_empty_object():
    translator = make_translator()
    upstream = [tool_event("w1", "Write", '{"a": 1'), tool_event("w1", "Write", stop=True)]
    message = final_via_sdk(run_pipeline(upstream, translator=translator))
    assert message["content"] == []
    assert message["stop_reason"] == "max_tokens"
    assert [f.kind for f in translator.findings] == ["tool_input_truncated"]


# ---------------------------------------------------------------------- failures


def test_exception_after_content_makes_the_sdk_raise():
    translator = make_translator()
    upstream = [
        text_event("Partial answ"),
        encode_exception("ThrottlingException", {"message": "Too many requests"}),
        text_event("never seen"),
    ]
    events = run_pipeline(upstream, translator=translator)
    assert events[-1]["type"] == "error"
    assert [e["type"] for e in events[-3:-1]] == ["content_block_delta", "content_block_stop"]
    with pytest.raises(anthropic.APIStatusError) as raised:
        sdk().final_message(events)
    assert raised.value.body["error"]["type"] == "rate_limit_error"
    assert translator.failure is not None and translator.failure.status == 429


def test_error_frame_makes_the_sdk_raise():
    events = run_pipeline([text_event("x"), encode_error("InternalFailure", "boom")])
    with pytest.raises(anthropic.APIStatusError):
        sdk().final_message(events)


def test_crc_corrupted_frame_fails_the_stream():
    good = text_event("Hello")
    bad = bytearray(text_event(" world"))
    bad[-6] ^= 0xFF  # a payload byte: the message CRC no longer matches
    translator = make_translator()
    events = run_pipeline([good, bytes(bad), text_event("after")], translator=translator)
    # 502: Amazon Q (or something between) sent bytes that are not a valid event stream.
    assert translator.failure is not None and translator.failure.status == 502
    assert "CRC" in translator.failure.message
    with pytest.raises(anthropic.APIStatusError):
        sdk().final_message(events)


def test_stream_cut_mid_frame_fails_instead_of_ending_normally():
    data = text_event("Hello") + text_event(" world")
    events = run_pipeline(data[:-5])
    assert events[-1]["type"] == "error"
    assert "message_stop" not in [e["type"] for e in events]
    with pytest.raises(anthropic.APIStatusError):
        sdk().final_message(events)


def test_context_overflow_exception_maps_to_prompt_too_long():
    translator = make_translator(input_tokens=250_000, context_window=200_000)
    events = run_pipeline(
        [
            encode_exception(
                "ValidationException",
                {"message": "Input is too long.", "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD"},
            )
        ],
        translator=translator,
    )
    assert not translator.has_content
    assert translator.failure is not None and translator.failure.status == 400
    assert translator.failure.message.startswith("prompt is too long: 250000 tokens > 200000 maximum")
    assert events[-1]["error"]["type"] == "invalid_request_error"


# ---------------------------------------------------------------------- local stop conditions


def test_stop_sequence_spanning_frames():
    translator = make_translator(stop_sequences=["STOP", "\n\nHuman:"])
    upstream = [text_event("Here it is.\n"), text_event("\nHum"), text_event("an: ignored"), text_event("more")]
    message = final_via_sdk(run_pipeline(upstream, translator=translator))
    assert message["content"] == [{"type": "text", "text": "Here it is."}]
    assert message["stop_reason"] == "stop_sequence"
    assert message["stop_sequence"] == "\n\nHuman:"
    assert translator.finished


def test_held_back_stop_prefix_is_released_when_no_match_follows():
    upstream = [text_event("a ST"), text_event("OP? no: STO"), text_event("RY")]
    message = final_via_sdk(run_pipeline(upstream, stop_sequences=["STOP!"]))
    assert message["content"] == [{"type": "text", "text": "a STOP? no: STORY"}]
    assert message["stop_reason"] == "end_turn"


def test_max_tokens_cuts_the_text_locally():
    translator = make_translator(max_tokens=5)
    upstream = [text_event("word " * 10), text_event("more words"), metadata(7, 999)]
    message = final_via_sdk(run_pipeline(upstream, translator=translator))
    assert message["stop_reason"] == "max_tokens"
    text = message["content"][0]["text"]
    assert "word word" in text and len(text) < 50
    assert message["usage"]["output_tokens"] <= 5


def test_one_sse_chunk_of_a_whole_reply_reads_back_as_the_same_events():
    events = run_pipeline([text_event("x"), tool_event("t", "n", "{}", stop=True)])
    read_back = [(sse.event, sse.json()) for sse in SSEDecoder().iter_bytes(iter([encode_sse(events)]))]
    assert read_back == [(event["type"], event) for event in events]


def test_a_fault_of_our_own_while_translating_ends_with_one_error_event(monkeypatch):
    translator = make_translator()

    def broken_feed_all(frames):
        raise RuntimeError("translator bug")

    monkeypatch.setattr(translator, "feed_all", broken_feed_all)

    async def pump_once():
        async def reads():
            yield text_event("Hello")

        pump = ReplyPump(reads(), translator)
        events = await pump.read()
        return pump, events

    pump, events = asyncio.run(pump_once())
    assert [event["type"] for event in events] == ["error"]
    assert events[0]["error"]["type"] == "api_error" and "translator bug" not in events[0]["error"]["message"]
    assert pump.finished and pump.failure is not None and pump.failure.status == 500
