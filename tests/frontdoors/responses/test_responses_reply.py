"""Claude stream events → the Responses stream: the event grammar the SDK and Codex read, and the response."""

from __future__ import annotations

from typing import Any

from q2api.frontdoors.client_schema import compile_client_schema
from q2api.frontdoors.openai_shared import ResponseCheck
from q2api.frontdoors.responses.framing import sse_bytes
from q2api.frontdoors.responses.message_events import claude_events_of
from q2api.frontdoors.responses.reply import ResponseBuilder, ResponseFrame
from q2api.frontdoors.responses.request import ReplyOptions
from q2api.frontdoors.responses.tools import ToolName

FRAME = ResponseFrame("resp_1", "claude-sonnet-5-5", {"store": True}, created_at=1)


def message(*content: dict[str, Any], stop: str = "end_turn", usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 20},
    }


def play(claude: dict[str, Any], options: ReplyOptions | None = None) -> tuple[list[dict[str, Any]], ResponseBuilder]:
    reported: list[str] = []
    builder = ResponseBuilder(FRAME, options or ReplyOptions(), report=reported.append)
    return builder.add_all(claude_events_of(claude)), builder


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def test_text_tool_call_and_sequence_numbers():
    events, builder = play(
        message(
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "call_1", "name": "ns__spawn", "input": {"a": 1}},
            stop="tool_use",
        ),
        ReplyOptions(tool_names={"ns__spawn": ToolName("spawn", "ns")}),
    )
    assert kinds(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    final = builder.final
    assert final is not None and final["status"] == "completed" and final["id"] == "resp_1"
    text, call = final["output"]
    assert text["content"][0]["text"] == "Looking." and text["status"] == "completed"
    assert (call["call_id"], call["name"], call["namespace"], call["arguments"]) == ("call_1", "spawn", "ns", '{"a":1}')
    added = events[8]["item"]
    assert added["status"] == "in_progress" and added["arguments"] == "" and added["id"] == call["id"]
    assert final["usage"]["total_tokens"] == 30 and final["store"] is True


def test_reasoning_as_text_or_as_summary():
    thinking = {"type": "thinking", "thinking": "deep", "signature": "sig"}
    events, builder = play(message(thinking, {"type": "text", "text": "ok"}))
    assert "response.reasoning_text.delta" in kinds(events) and "response.reasoning_summary_text.delta" not in kinds(
        events
    )
    reasoning = builder.final["output"][0]  # type: ignore[index]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "deep"}] and reasoning["summary"] == []
    assert reasoning["encrypted_content"] is None

    events, builder = play(
        message(thinking, {"type": "text", "text": "ok"}), ReplyOptions(summaries=True, encrypted_reasoning=True)
    )
    assert kinds(events)[2:8] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    reasoning = builder.final["output"][0]  # type: ignore[index]
    assert (
        reasoning["summary"] == [{"type": "summary_text", "text": "deep"}] and reasoning["encrypted_content"] == "sig"
    )
    usage = builder.final["usage"]  # type: ignore[index]
    assert 0 < usage["output_tokens_details"]["reasoning_tokens"] < usage["output_tokens"]


def test_an_output_limit_or_a_refusal_is_incomplete():
    events, builder = play(message({"type": "text", "text": "cut"}, stop="max_tokens"))
    assert kinds(events)[-1] == "response.incomplete"
    assert builder.final["incomplete_details"] == {"reason": "max_output_tokens"}  # type: ignore[index]
    _, builder = play(message({"type": "text", "text": "no"}, stop="refusal"))
    assert builder.final["incomplete_details"] == {"reason": "content_filter"}  # type: ignore[index]


def test_an_error_event_fails_the_response_after_what_arrived():
    builder = ResponseBuilder(FRAME, ReplyOptions(), report=lambda _: None)
    events = claude_events_of(message({"type": "text", "text": "part"}))[:4]  # start, block start, delta, stop
    out = builder.add_all([*events, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}])
    assert kinds(out)[-2:] == ["error", "response.failed"]
    assert out[-2]["code"] == "rate_limit_exceeded" and out[-2]["message"] == "slow down"
    failed = out[-1]["response"]
    assert failed["status"] == "failed" and failed["error"] == {"code": "rate_limit_exceeded", "message": "slow down"}
    assert failed["output"][0]["content"][0]["text"] == "part"
    assert builder.add({"type": "message_stop"}) == []  # nothing after the end


def test_a_reply_that_fails_text_format_fails_before_its_text_is_final():
    check = ResponseCheck("json please", compile_client_schema({"type": "object", "required": ["a"]}))
    events, builder = play(message({"type": "text", "text": '{"b": 1}'}), ReplyOptions(check=check))
    assert "response.output_text.done" not in kinds(events) and kinds(events)[-2:] == ["error", "response.failed"]
    assert builder.final["error"]["code"] == "invalid_response_format"  # type: ignore[index]
    events, builder = play(message({"type": "text", "text": '{"a": 1}'}), ReplyOptions(check=check))
    assert kinds(events)[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_sse_bytes_name_each_event():
    assert sse_bytes([{"type": "response.created", "sequence_number": 0}]) == (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n'
    )


# -- web search --------------------------------------------------------------------

SEARCH_CALL = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q2api news"}}
RESULTS = [
    {"type": "web_search_result", "title": "One", "url": "https://one.test/a", "page_age": None},
    {"type": "web_search_result", "title": "Two", "url": "https://two.test/b", "page_age": None},
]
CITATION = {"type": "web_search_result_location", "url": "https://one.test/a", "title": "One", "cited_text": "came out"}


def searched(content: Any = None, *, citations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": RESULTS if content is None else content,
    }
    answer = {"type": "text", "text": "It came out today.", "citations": citations}
    return message({"type": "text", "text": "Searching."}, SEARCH_CALL, result, answer)


def test_a_search_is_a_web_search_call_item_with_its_events():
    events, builder = play(searched(citations=[CITATION]), ReplyOptions(search_sources=True))
    assert kinds(events)[8:14] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    added, done = events[8]["item"], events[12]["item"]
    assert added["type"] == "web_search_call" and added["status"] == "in_progress" and added["id"].startswith("ws_")
    assert all(event["item_id"] == added["id"] and event["output_index"] == 1 for event in events[9:12])
    assert done == {
        "id": added["id"],
        "type": "web_search_call",
        "status": "completed",
        "action": {
            "type": "search",
            "query": "q2api news",
            "sources": [{"type": "url", "url": "https://one.test/a"}, {"type": "url", "url": "https://two.test/b"}],
        },
    }
    # The citation: an annotation of the answer's text, announced before the text is done.
    annotation = {
        "type": "url_citation",
        "url": "https://one.test/a",
        "title": "One",
        "start_index": 3,
        "end_index": 11,
    }
    added_annotation = next(event for event in events if event["type"] == "response.output_text.annotation.added")
    assert added_annotation["annotation"] == annotation and added_annotation["annotation_index"] == 0
    assert kinds(events)[-6:] == [
        "response.output_text.delta",
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = builder.final
    assert final is not None and [item["type"] for item in final["output"]] == ["message", "web_search_call", "message"]
    assert final["output"][2]["content"][0]["annotations"] == [annotation]
    assert "It came out today."[3:11] == "came out"
    assert [event["sequence_number"] for event in events] == list(range(len(events)))


def test_sources_only_when_included_and_a_citation_without_its_text_spans_the_whole_text():
    elsewhere = {**CITATION, "cited_text": "not in the answer", "title": None}
    _, builder = play(searched(citations=[elsewhere]))
    final = builder.final
    assert final is not None
    assert final["output"][1]["action"] == {"type": "search", "query": "q2api news"}
    (annotation,) = final["output"][2]["content"][0]["annotations"]
    assert (annotation["start_index"], annotation["end_index"]) == (0, len("It came out today."))
    assert annotation["title"] == "https://one.test/a"  # the SDK requires a title: the URL stands in


def test_a_failed_search_is_a_failed_item_and_the_turn_goes_on():
    error = {"type": "web_search_tool_result_error", "error_code": "unavailable"}
    events, builder = play(searched(error), ReplyOptions(search_sources=True))
    assert "response.web_search_call.completed" not in kinds(events)
    final = builder.final
    assert final is not None and final["status"] == "completed"
    assert final["output"][1]["status"] == "failed" and "sources" not in final["output"][1]["action"]
    assert final["output"][2]["content"][0]["text"] == "It came out today."


def test_a_search_cut_off_by_an_error_is_incomplete():
    builder = ResponseBuilder(FRAME, ReplyOptions(), report=lambda _: None)
    events = claude_events_of(searched())[:7]  # up to the search call's stop: the search is running
    assert kinds(builder.add_all(events))[-1] == "response.web_search_call.searching"
    out = builder.add({"type": "error", "error": {"type": "api_error", "message": "gone"}})
    assert out[-1]["response"]["output"][1]["status"] == "incomplete"


def test_every_search_event_parses_as_the_sdks_stream_event():
    """Each event of a search and of its citation validates as the SDK's own type (openai/types/responses/)."""
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    events, _ = play(searched(citations=[CITATION]), ReplyOptions(search_sources=True))
    adapter = TypeAdapter(ResponseStreamEvent)
    names = {
        "response.web_search_call.in_progress": "ResponseWebSearchCallInProgressEvent",
        "response.web_search_call.searching": "ResponseWebSearchCallSearchingEvent",
        "response.web_search_call.completed": "ResponseWebSearchCallCompletedEvent",
        "response.output_text.annotation.added": "ResponseOutputTextAnnotationAddedEvent",
        "response.output_item.added": "ResponseOutputItemAddedEvent",
        "response.output_item.done": "ResponseOutputItemDoneEvent",
        "response.content_part.done": "ResponseContentPartDoneEvent",
    }
    checked = [event for event in events if event["type"] in names]
    assert len(checked) == 12  # three items added and done, two parts done, three search events, one annotation
    for event in checked:
        parsed = adapter.validate_python(event)
        assert type(parsed).__name__ == names[event["type"]]
        item = getattr(parsed, "item", None)
        if item is not None and item.type == "web_search_call":
            assert type(item).__name__ == "ResponseFunctionWebSearch" and item.action.type == "search"
