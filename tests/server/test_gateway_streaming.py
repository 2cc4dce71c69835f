"""Streaming through the real gateway: the SSE grammar the SDK relies on, and every way a stream can break.

A successful stream is `message_start`, blocks, `message_delta`, `message_stop`. A
reply that breaks after content reached the client ends with an `error` event
(never a normal `message_stop`); one that breaks before any content is a real HTTP
status, thanks to the hold. Pings keep a silent stream alive, and a client that goes
away closes the upstream request.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid

import anthropic
import httpx2
import pytest

from q2api.testing import scripts
from q2api.testing.scripts import Pause
from q2api.translation.translator import StreamTranslator
from tests.support.claude_code_request import MCP_TOOL_NAME, claude_code_request
from tests.support.gateway_harness import MODEL, Gateway, RawEvent, capture_logs, open_gateway, read_sse, user

MESSAGE = {"model": MODEL, "max_tokens": 200}


async def collect(stream: anthropic.AsyncStream) -> list:
    return [event async for event in stream]


def streamed_text(events: list) -> str:
    return "".join(
        event.delta.text for event in events if event.type == "content_block_delta" and event.delta.type == "text_delta"
    )


# -- the grammar of a good stream ------------------------------------------


async def test_stream_helper_final_message_is_the_text(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Streaming, one piece at a time.", chunks=6, delay=0.01))
    async with gw.client.messages.stream(**MESSAGE, messages=[user("stream please")]) as stream:
        message = await stream.get_final_message()

    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Streaming, one piece at a time."
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0


async def test_raw_events_come_in_the_documented_order(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Every event in its place.", chunks=5, delay=0.01))
    events = await collect(await gw.client.messages.create(**MESSAGE, messages=[user("order?")], stream=True))
    kinds = [event.type for event in events]

    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    deltas = kinds[2:-3]
    assert deltas and set(deltas) == {"content_block_delta"}
    assert streamed_text(events) == "Every event in its place."
    assert events[0].message.model == MODEL and events[0].message.id.startswith("msg_")
    assert events[-2].delta.stop_reason == "end_turn" and events[-2].usage.output_tokens > 0


# -- Claude Code traffic ----------------------------------------------------------


async def test_claude_code_request_streams_thinking_then_text(gw: Gateway):
    body = claude_code_request(size_kb=60)
    known = {key: body.pop(key) for key in ("model", "max_tokens", "messages")}
    assert body.pop("stream") is True and body["thinking"] == {"type": "adaptive"}
    gw.sim.enqueue(scripts.thinking_reply("The user wants the tests run.", "Running the test suite now.", chunks=4))

    stream = await gw.client.messages.create(
        **known,
        stream=True,
        extra_body=body,  # system, tools, thinking, output_config, context_management, metadata as sent
        extra_query={"beta": "true"},
        extra_headers={"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"},
    )
    events = await collect(stream)

    starts = [event.content_block.type for event in events if event.type == "content_block_start"]
    assert starts == ["thinking", "text"]
    thinking = "".join(
        e.delta.thinking for e in events if e.type == "content_block_delta" and e.delta.type == "thinking_delta"
    )
    assert thinking == "The user wants the tests run."
    assert streamed_text(events) == "Running the test suite now."
    assert events[-1].type == "message_stop"
    assert events[0].message.model == known["model"]

    upstream = gw.upstream_body()["conversationState"]
    current = upstream["currentMessage"]["userInputMessage"]
    assert "Now run the test suite." in current["content"]
    tool_names = [tool["toolSpecification"]["name"] for tool in current["userInputMessageContext"]["tools"]]
    assert len(tool_names) == len(body["tools"]) and MCP_TOOL_NAME not in tool_names
    assert upstream["history"]  # the earlier tool rounds went along


# -- broken replies --------------------------------------------------------------


async def test_exception_after_content_ends_the_stream_with_an_error_event(gw: Gateway):
    gw.sim.enqueue(scripts.mid_stream_exception(text_before="Partial answer"))
    stream = await gw.client.messages.create(**MESSAGE, messages=[user("break, please")], stream=True)
    seen: list = []
    with pytest.raises(anthropic.APIStatusError) as raised:
        async for event in stream:
            seen.append(event)

    assert streamed_text(seen) == "Partial answer"  # content did arrive first
    assert "message_stop" not in [event.type for event in seen]
    assert raised.value.status_code == 200  # the status was sent with the first byte
    assert raised.value.body["type"] == "error"
    assert raised.value.body["error"]["type"] in {"api_error", "overloaded_error"}
    assert len(gw.sim.requests) == 1  # after the first byte went out, nothing is retried


@pytest.mark.parametrize(
    "reply",
    [scripts.truncated_reply(), scripts.dropped_reply(), scripts.corrupted_reply()],
    ids=["truncated", "dropped", "corrupted"],
)
async def test_a_broken_body_never_looks_like_a_finished_reply(gw: Gateway, reply):
    gw.sim.enqueue(reply, reply)
    async with (
        gw.http() as http,
        http.stream("POST", "/v1/messages", json={**MESSAGE, "stream": True, "messages": [user("hi")]}) as response,
    ):
        assert response.status_code == 200
        events = [event async for event in read_sse(response)]

    names = [event.name for event in events]
    assert names[0] == "message_start" and names[-1] == "error"
    assert "message_stop" not in names and "message_delta" not in names
    assert "content_block_stop" in names  # the open block was closed before the error
    assert '"Partial answer"' in "".join(event.data for event in events)

    # The SDK raises while iterating, after the partial text.
    stream = await gw.client.messages.create(**MESSAGE, messages=[user("hi")], stream=True)
    seen: list = []
    with pytest.raises(anthropic.APIStatusError) as raised:
        async for event in stream:
            seen.append(event)
    assert streamed_text(seen) == "Partial answer"
    assert raised.value.body["error"]["type"] == "api_error"
    assert len(gw.sim.requests) == 2  # one per request above: a reply broken after its first byte is not retried


async def test_failure_before_any_content_is_a_real_http_status(gw: Gateway):
    gw.sim.enqueue(
        scripts.stream(scripts.conversation_event(), scripts.exception_frame("Encountered an unexpected error"))
    )
    with pytest.raises(anthropic.APIStatusError) as raised:
        await gw.client.messages.create(**MESSAGE, messages=[user("hi")], stream=True)

    assert raised.value.status_code >= 400
    assert raised.value.body["type"] == "error"
    assert raised.value.response.headers["content-type"].startswith("application/json")


# -- pings and disconnects ------------------------------------------------------


async def streamed_events(gw: Gateway) -> list[RawEvent]:
    async with gw.http() as http:
        body = {**MESSAGE, "stream": True, "messages": [user("take your time")]}
        async with http.stream("POST", "/v1/messages", json=body) as response:
            assert response.status_code == 200
            return [event async for event in read_sse(response)]


async def test_pings_keep_a_stalled_stream_alive(tmp_path):
    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gw:
        # A stall of forty ping intervals: a busy machine may skip some pings, never all of them.
        gw.sim.enqueue(scripts.stalled_reply(2.0, text_before="Working", text_after=" done"))
        events = await streamed_events(gw)

    names = [event.name for event in events]
    first_delta = names.index("content_block_delta")
    second_delta = names.index("content_block_delta", first_delta + 1)
    assert "ping" in names[first_delta:second_delta]
    assert names[-1] == "message_stop"
    assert "".join(event.data for event in events).count("Working") == 1


async def test_pings_start_once_the_hold_ends_without_content(tmp_path):
    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05", Q2API_STREAM_HOLD_SECONDS="0.05") as gw:
        gw.sim.enqueue(scripts.stream(scripts.conversation_event(), Pause(0.4), scripts.text_events("late")))
        events = await streamed_events(gw)

    names = [event.name for event in events]
    assert names[0] == "message_start"
    assert "ping" in names[: names.index("content_block_start")]
    assert names[-1] == "message_stop"


async def test_client_disconnect_closes_the_upstream_request(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("slow " * 40, chunks=40, delay=0.05))
    with capture_logs() as logs:
        async with gw.http() as http:
            body = {**MESSAGE, "stream": True, "messages": [user("slowly")]}
            async with http.stream("POST", "/v1/messages", json=body) as response:
                async for chunk in response.aiter_bytes():
                    assert b"message_start" in chunk
                    break
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=5)
        assert gw.sim.active_streams == 0 and gw.sim.streams_completed == 0
        assert await gw.sim.wait_until(lambda: bool(logs.request_lines()), timeout=5)

    (line,) = logs.request_lines()
    assert "error=client_disconnected" in line.message


async def test_a_client_that_leaves_stops_a_fast_upstream_at_once(gw: Gateway):
    # 64 MB that Amazon Q can send as fast as the gateway reads: the client takes 125 KB and
    # leaves. The gateway must stop reading (and close the upstream), not drain the reply.
    reply_bytes = 64 * 1024 * 1024
    gw.sim.enqueue(scripts.stream(scripts.conversation_event(), scripts.text_events("z" * reply_bytes, chunks=6400)))
    with capture_logs() as logs:
        async with gw.http() as http:
            body = {**MESSAGE, "stream": True, "messages": [user("a lot")]}
            async with http.stream("POST", "/v1/messages", json=body) as response:
                received = 0
                async for chunk in response.aiter_raw():
                    received += len(chunk)
                    if received >= 125 * 1024:
                        break
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=10)
        assert await gw.sim.wait_until(lambda: bool(logs.request_lines()), timeout=5)
    assert gw.sim.streams_completed == 0
    # What the simulator wrote includes what loopback socket buffers held (several MB): far
    # from the whole reply, which is what a gateway that keeps reading would have taken.
    assert gw.sim.bytes_streamed < reply_bytes // 2
    (line,) = logs.request_lines()
    assert line.extra["status"] == 499 and "error=client_disconnected" in line.message


async def leave_before_the_response_starts(gw: Gateway, *, stream: bool) -> None:
    """Post, then give up (client timeout) before any response byte arrives."""
    async with gw.http(timeout=0.3) as http:
        with pytest.raises(httpx2.ReadTimeout):
            body = {**MESSAGE, "stream": stream, "messages": [user("never mind")]}
            async with http.stream("POST", "/v1/messages", json=body) as response:
                await response.aread()


async def test_leaving_a_non_streaming_request_closes_the_upstream_request(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("slow " * 200, chunks=200, delay=0.05))  # ten seconds of reply
    with capture_logs() as logs:
        await leave_before_the_response_starts(gw, stream=False)
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=5)
        assert await gw.sim.wait_until(lambda: bool(logs.request_lines()), timeout=5)
    assert gw.sim.streams_completed == 0
    (line,) = logs.request_lines()
    assert line.extra["status"] == 499 and "error=client_disconnected" in line.message


async def test_leaving_during_the_hold_closes_the_upstream_request(tmp_path):
    # The hold outlasts the test: only the client leaving can end this request early.
    async with open_gateway(tmp_path, Q2API_STREAM_HOLD_SECONDS="30") as gw:
        gw.sim.enqueue(scripts.stream(scripts.conversation_event(), Pause(30), scripts.text_events("too late")))
        await leave_before_the_response_starts(gw, stream=True)
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=5)
        assert gw.sim.active_streams == 0


async def test_a_fault_of_our_own_mid_stream_ends_with_an_error_event(gw: Gateway, monkeypatch):
    # Fault injection: translation breaks on the second upstream read, after content was sent.
    translate = StreamTranslator.feed_all
    reads = itertools.count()

    def feed_all_then_break(self, frames):
        if next(reads) == 1:
            raise RuntimeError("a translator bug")
        return translate(self, frames)

    monkeypatch.setattr(StreamTranslator, "feed_all", feed_all_then_break)
    gw.sim.enqueue(scripts.stream(scripts.text_events("Partial"), Pause(0.2), scripts.text_events(" rest")))
    with capture_logs() as logs:
        stream = await gw.client.messages.create(**MESSAGE, messages=[user("hi")], stream=True)
        seen: list = []
        with pytest.raises(anthropic.APIStatusError) as raised:
            async for event in stream:
                seen.append(event)
        assert await gw.sim.wait_until(lambda: bool(logs.request_lines()), timeout=5)

    assert streamed_text(seen) == "Partial"
    assert raised.value.body["error"]["type"] == "api_error"
    assert "a translator bug" not in str(raised.value.body)  # details go to the log, not the client
    assert "a translator bug" in logs.text
    (line,) = logs.request_lines()
    assert "error=api_error" in line.message


# -- concurrency ---------------------------------------------------------------------


async def test_concurrent_streams_each_get_their_own_reply(gw: Gateway):
    # No script queued: the simulator echoes each request's own text back.
    async def ask(index: int) -> tuple[str, str]:
        marker = f"request-{index}-{uuid.uuid4().hex[:8]}"
        async with gw.client.messages.stream(**MESSAGE, messages=[user(marker)]) as stream:
            message = await stream.get_final_message()
        return marker, message.content[0].text

    answers = await asyncio.gather(*(ask(index) for index in range(20)))

    for marker, text in answers:
        assert text.endswith(f"You said: {marker}")
    assert len(gw.sim.requests) == 20


@pytest.mark.parametrize(
    "reply",
    [scripts.truncated_reply(), scripts.dropped_reply(), scripts.corrupted_reply()],
    ids=["truncated", "dropped", "corrupted"],
)
async def test_a_broken_body_of_a_non_streaming_reply_keeps_its_status(gw: Gateway, reply):
    # Nothing was sent yet, so the client gets the fault's own status (502: Amazon Q's reply broke),
    # not a generic 500 rebuilt from the error event.
    gw.sim.enqueue(reply)
    with capture_logs() as logs:
        async with gw.http() as http:
            response = await http.post("/v1/messages", json={**MESSAGE, "messages": [user("hi")]})
        assert await gw.sim.wait_until(lambda: bool(logs.request_lines()), timeout=5)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "api_error"
    (line,) = logs.request_lines()
    assert line.extra["status"] == 502
