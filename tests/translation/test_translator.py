"""The stream translator as a state machine: phases, grammar, usage, failures, tools, findings."""

from __future__ import annotations

from typing import Any

import pytest

from q2api.amazonq.eventstream import (
    EventStreamDecoder,
    Frame,
    encode_error,
    encode_event,
    encode_exception,
    encode_frame,
)
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.token_count import estimate_text_tokens
from q2api.translation.translator import Phase, StreamTranslator
from tests.support.pipeline import aggregate, check_grammar, make_translator, text_event, tool_event


def frames(*encoded: bytes) -> list[Frame]:
    return EventStreamDecoder().feed(b"".join(encoded))


def run(translator: StreamTranslator, *encoded: bytes, finish: bool = True) -> list[dict[str, Any]]:
    events = translator.start()
    for frame in frames(*encoded):
        events += translator.feed(frame)
    if finish:
        events += translator.finish()
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] if e["type"] != "content_block_delta" else e["delta"]["type"] for e in events]


# ---------------------------------------------------------------------- phases and start


def test_phases_follow_the_reply():
    translator = make_translator()
    assert translator.phase is Phase.NOT_STARTED
    translator.start()
    assert translator.phase is Phase.IDLE
    [frame] = frames(text_event("hi"))
    translator.feed(frame)
    assert translator.phase is Phase.IN_TEXT
    [frame] = frames(tool_event("t", "n"))
    translator.feed(frame)
    assert translator.phase is Phase.IN_TOOL_USE
    [frame] = frames(tool_event("t", "n", "{}", stop=True))
    translator.feed(frame)
    assert translator.phase is Phase.IDLE
    translator.finish()
    assert translator.phase is Phase.DONE and translator.finished


def test_message_start_comes_first_even_without_start_and_only_once():
    translator = make_translator(input_tokens=1234)
    [frame] = frames(encode_event("messageMetadataEvent", {"conversationId": "c"}))
    events = translator.feed(frame)
    assert events == [
        {
            "type": "message_start",
            "message": {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": translator.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 1234,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }
    ]
    assert translator.start() == []


def test_generated_message_ids_look_like_anthropic_ids_and_differ():
    first = StreamTranslator(model="m").start()[0]["message"]["id"]
    second = StreamTranslator(model="m").start()[0]["message"]["id"]
    assert first.startswith("msg_") and first != second


def test_empty_upstream_reply_still_ends_properly():
    translator = make_translator()
    events = translator.finish()
    assert types(events) == ["message_start", "message_delta", "message_stop"]
    assert events[1]["delta"]["stop_reason"] == "end_turn"
    assert events[1]["usage"]["output_tokens"] == 1
    assert [f.kind for f in translator.findings] == ["empty_reply"]


def test_has_content_turns_true_with_the_first_block_only():
    translator = make_translator()
    translator.start()
    for frame in frames(encode_event("messageMetadataEvent", {}), text_event("  \n")):
        translator.feed(frame)
    assert not translator.has_content  # whitespace alone opens no block
    [frame] = frames(text_event("x"))
    translator.feed(frame)
    assert translator.has_content


def test_whitespace_before_text_is_kept_but_before_thinking_is_dropped():
    events = run(make_translator(), text_event("\n"), text_event("  Hello"))
    assert aggregate(events)["content"] == [{"type": "text", "text": "\n  Hello"}]
    events = run(make_translator(), text_event("\n"), text_event("<thinking>t</thinking>A"))
    assert [b["type"] for b in aggregate(events)["content"]] == ["thinking", "text"]


# ---------------------------------------------------------------------- usage


@pytest.mark.parametrize("percentage", [1e308, -3, 250, "12"])
def test_an_impossible_context_percentage_falls_back_to_the_estimate(percentage):
    translator = make_translator(input_tokens=500, context_window=200_000)
    run(translator, text_event("x"), encode_event("contextUsageEvent", {"contextUsagePercentage": percentage}))
    assert translator.usage["input_tokens"] == 500


def test_usage_prefers_metadata_then_context_percentage_then_estimate():
    estimate_only = make_translator(input_tokens=500)
    run(estimate_only, text_event("hello there"))
    assert estimate_only.usage["input_tokens"] == 500
    assert estimate_only.usage["output_tokens"] >= 1

    by_context = make_translator(input_tokens=500, context_window=200_000)
    run(by_context, text_event("x"), encode_event("contextUsageEvent", {"contextUsagePercentage": 12.5}))
    assert by_context.usage["input_tokens"] == 25_000

    by_metadata = make_translator(input_tokens=500)
    events = run(
        by_metadata,
        text_event("x"),
        encode_event("contextUsageEvent", {"contextUsagePercentage": 12.5}),
        encode_event(
            "metadataEvent",
            {
                "tokenUsage": {
                    "uncachedInputTokens": 321,
                    "outputTokens": 77,
                    "totalTokens": 398,
                    "cacheReadInputTokens": 1000,
                    "cacheWriteInputTokens": 20,
                }
            },
        ),
    )
    assert events[-2]["usage"] == {
        "input_tokens": 321,
        "output_tokens": 77,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 1000,
    }


def test_output_tokens_are_counted_when_upstream_reports_zero():
    translator = make_translator()
    events = run(
        translator,
        text_event("word " * 40),
        encode_event("metadataEvent", {"tokenUsage": {"uncachedInputTokens": 5, "outputTokens": 0}}),
    )
    assert events[-2]["usage"]["output_tokens"] >= 20


def test_tool_input_counts_as_output():
    translator = make_translator()
    raw = '{"content": "' + " ".join(f"word{i}" for i in range(100)) + '"}'
    run(translator, tool_event("t", "n", raw, stop=True))
    assert translator.usage["output_tokens"] == estimate_text_tokens(raw) > 50


# ---------------------------------------------------------------------- failures


def test_bad_json_payload_fails_the_stream_without_a_crash():
    translator = make_translator()
    bad = encode_frame(
        {":message-type": "event", ":event-type": "assistantResponseEvent", ":content-type": "application/json"},
        b'{"content": "unterminated',
    )
    events = run(translator, text_event("ok"), bad, text_event("later"))
    assert types(events)[-3:] == ["text_delta", "content_block_stop", "error"]
    assert translator.failure is not None and translator.failure.status == 500
    assert events[-1]["error"]["type"] == "api_error"
    assert translator.phase is Phase.FAILED


def test_bad_json_payload_also_fails_when_read_in_a_batch():
    translator = make_translator()
    translator.start()
    bad = encode_frame({":message-type": "event", ":event-type": "assistantResponseEvent"}, b"[1, 2]")
    events = translator.feed_all(frames(text_event("ok"), bad, text_event("later")))
    assert types(events) == ["content_block_start", "text_delta", "content_block_stop", "error"]


def test_exception_before_content_leaves_nothing_committed():
    translator = make_translator()
    events = run(translator, encode_exception("ThrottlingException", {"message": "slow down"}))
    assert types(events) == ["message_start", "error"]
    assert not translator.has_content
    assert translator.failure.status == 429
    assert translator.failure.headers.get("retry-after")


def test_exception_code_is_sanitised_and_payload_type_used_for_the_modelled_error_member():
    translator = make_translator()
    run(translator, encode_exception("com.amazon.aws#ThrottlingException:http://x", {"message": "m"}))
    assert translator.failure.status == 429

    translator = make_translator()
    run(translator, encode_exception("error", {"message": "try later", "reason": "MODEL_TEMPORARILY_UNAVAILABLE"}))
    assert translator.failure.status == 529


def test_error_frame_uses_its_headers():
    translator = make_translator()
    events = run(translator, text_event("x"), encode_error("ThrottlingException", "Rate exceeded"))
    assert translator.failure.status == 429
    assert "Rate exceeded" in events[-1]["error"]["message"]


def test_fail_closes_an_open_thinking_block_with_a_signature_first():
    translator = make_translator()
    run(translator, text_event("<thinking>hmm"), finish=False)
    events = translator.fail(AnthropicError(504, "read timeout"))
    assert types(events) == ["signature_delta", "content_block_stop", "error"]
    assert events[-1]["error"] == {"type": "timeout_error", "message": "read timeout"}
    assert translator.fail(AnthropicError(500, "again")) == []
    assert translator.finish() == []


def test_fail_after_a_normal_end_changes_nothing():
    translator = make_translator()
    run(translator, text_event("x"))
    assert translator.fail(AnthropicError(500, "late")) == []
    assert translator.failure is None


def test_frames_after_the_end_are_ignored():
    translator = make_translator(stop_sequences=["END"])
    run(translator, text_event("a END b"), finish=False)
    assert translator.finished
    [frame] = frames(text_event("more"))
    assert translator.feed(frame) == []
    assert translator.feed_all(frames(text_event("more"))) == []


def test_invalid_state_event_is_recorded_and_ignored():
    translator = make_translator()
    invalid_state = encode_event("invalidStateEvent", {"reason": "INVALID_TASK_ASSIST_PLAN", "message": "m"})
    events = run(translator, invalid_state, text_event("ok"))
    assert aggregate(events)["content"] == [{"type": "text", "text": "ok"}]
    assert [f.kind for f in translator.findings] == ["invalid_state_event"]
    assert "INVALID_TASK_ASSIST_PLAN" in str(translator.findings[0])


def test_wrapped_payloads_are_unwrapped():
    wrapped = encode_event("assistantResponseEvent", {"assistantResponseEvent": {"content": "hi"}})
    events = run(make_translator(), wrapped)
    assert aggregate(events)["content"] == [{"type": "text", "text": "hi"}]


def test_unknown_message_types_are_ignored_and_counted():
    translator = make_translator()
    odd = encode_frame({":message-type": "telemetry"}, b"{}")
    run(translator, odd, text_event("x"))
    assert translator.ignored_events == {":message-type telemetry": 1}


# ---------------------------------------------------------------------- tools


def test_a_new_tool_id_without_stop_judges_the_previous_call_as_it_stands():
    translator = make_translator()
    events = run(
        translator,
        tool_event("a", "first", '{"x": 1}'),
        tool_event("b", "second", '{"y": 2}', stop=True),
    )
    assert [b["id"] for b in aggregate(events)["content"]] == ["a", "b"]
    assert [f.kind for f in translator.findings] == ["tool_use_without_stop"]

    translator = make_translator()
    events = run(translator, tool_event("a", "first", '{"x": '), tool_event("b", "second", "{}", stop=True))
    assert [b["id"] for b in aggregate(events)["content"]] == ["b"]
    assert translator.stop_reason == "max_tokens"
    assert [f.kind for f in translator.findings] == ["tool_input_truncated"]


def test_tool_call_at_end_of_stream_without_stop():
    complete = make_translator()
    events = run(complete, tool_event("a", "n", '{"x": 1}'))
    assert aggregate(events)["content"][0]["input"] == {"x": 1}
    assert complete.stop_reason == "tool_use"

    never_started = make_translator()
    events = run(never_started, text_event("Let me call it."), tool_event("a", "n"))
    assert [b["type"] for b in aggregate(events)["content"]] == ["text"]
    assert never_started.stop_reason == "max_tokens"


def test_non_object_tool_input_is_withheld():
    translator = make_translator()
    events = run(translator, tool_event("a", "n", "[1, 2]", stop=True))
    assert aggregate(events)["content"] == []
    assert translator.findings[0].data["verdict"] == "not_an_object"


def test_late_events_of_a_judged_tool_are_ignored():
    translator = make_translator()
    events = run(translator, tool_event("a", "n", "{}", stop=True), tool_event("a", "n", '{"x": 1}', stop=True))
    assert aggregate(events)["content"] == [{"type": "tool_use", "id": "a", "name": "n", "input": {}}]
    assert [f.kind for f in translator.findings] == ["late_tool_use_event"]


def test_text_during_a_tool_call_judges_the_call_first():
    events = run(make_translator(), tool_event("a", "n", '{"x": 1}'), text_event("after"))
    assert [b["type"] for b in aggregate(events)["content"]] == ["tool_use", "text"]


def test_tool_use_closes_the_open_text_block_and_keeps_indices_consecutive():
    events = run(make_translator(), text_event("a"), tool_event("t", "n", "{}", stop=True), text_event("b"))
    check_grammar(events)
    assert [b["type"] for b in aggregate(events)["content"]] == ["text", "tool_use", "text"]


def test_missing_tool_id_gets_a_generated_one():
    events = run(make_translator(), encode_event("toolUseEvent", {"name": "n", "input": "{}", "stop": True}))
    [block] = aggregate(events)["content"]
    assert block["id"].startswith("toolu_") and block["name"] == "n"


def test_tool_input_is_sent_verbatim_after_validation():
    raw = '{"big": 123456789012345678901234567890, "s": "\\u00e9"}'
    events = run(make_translator(), tool_event("a", "n", raw, stop=True))
    deltas = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == [raw]


def test_withheld_tool_leaves_a_partial_tool_out_of_a_failed_stream():
    translator = make_translator()
    run(translator, tool_event("a", "n", '{"x"'), finish=False)
    events = translator.fail(AnthropicError(500, "broken"))
    assert types(events) == ["error"]
    assert [f.kind for f in translator.findings] == ["tool_input_lost"]


# ---------------------------------------------------------------------- thinking


def test_thinking_block_closes_with_a_deterministic_signature():
    first = run(make_translator(), text_event("<thinking>same</thinking>x"))
    second = run(make_translator(), text_event("<thinking>sa"), text_event("me</thinking>x"))
    assert aggregate(first)["content"][0]["signature"] == aggregate(second)["content"][0]["signature"]
    assert types(first)[1:5] == ["content_block_start", "thinking_delta", "signature_delta", "content_block_stop"]


def test_thinking_tags_can_be_turned_off():
    events = run(make_translator(thinking_tags=False), text_event("<thinking>x</thinking>"))
    assert aggregate(events)["content"] == [{"type": "text", "text": "<thinking>x</thinking>"}]


def test_empty_thinking_makes_no_block():
    events = run(make_translator(), text_event("<thinking></thinking>Answer"))
    assert aggregate(events)["content"] == [{"type": "text", "text": "Answer"}]


@pytest.mark.parametrize("per_frame", [True, False])
def test_grammar_holds_for_a_mixed_reply(per_frame: bool):
    translator = make_translator(tool_names={"q": "original"})
    upstream = frames(
        encode_event("reasoningContentEvent", {"text": "r"}),
        text_event("<thinking>t</thinking>\n"),
        text_event("text"),
        tool_event("a", "q", "{}", stop=True),
        encode_event("reasoningContentEvent", {"redactedContent": "xyz"}),
        text_event("more"),
    )
    events = translator.start()
    if per_frame:
        for frame in upstream:
            events += translator.feed(frame)
    else:
        events += translator.feed_all(upstream)
    events += translator.finish()
    check_grammar(events)
    assert [b["type"] for b in aggregate(events)["content"]] == [
        "thinking",
        "text",
        "tool_use",
        "redacted_thinking",
        "text",
    ]
    assert aggregate(events)["content"][0]["thinking"] == "rt"


def test_a_tool_call_ends_an_unterminated_inline_thinking():
    upstream = [text_event("<thinking>plan"), tool_event("t", "n", "{}", stop=True), text_event("\nAnswer")]
    events = run(make_translator(), *upstream)
    assert [b["type"] for b in aggregate(events)["content"]] == ["thinking", "tool_use", "text"]
    assert aggregate(events)["content"][2]["text"] == "Answer"


def test_budget_spent_while_releasing_held_text_ends_before_a_reasoning_block():
    translator = make_translator(max_tokens=2, stop_sequences=["STOP"])
    events = run(translator, text_event("ab ST"), encode_event("reasoningContentEvent", {"text": "more thoughts"}))
    check_grammar(events)
    assert translator.stop_reason == "max_tokens"
