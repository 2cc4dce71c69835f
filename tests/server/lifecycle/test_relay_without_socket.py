"""The request lifecycle driven without a socket: a body, headers and a disconnect signal in, the
answer written into a list-backed sink (and its one log line) out — no app, no port, no client
(q2api.server.lifecycle)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import orjson
import pytest
from starlette.types import Message

from q2api.amazonq.errors import UpstreamHTTPError
from q2api.amazonq.upstream import OpenedReply
from q2api.frontdoors.chat.door import CHAT_DOOR
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.door import DoorCall, FrontDoor
from q2api.frontdoors.responses.door import RESPONSES_DOOR, ResponsesCall
from q2api.models.routing import ModelRouter
from q2api.models.table import builtin_catalogue
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.lifecycle.relay import MessagesRelay
from q2api.server.lifecycle.sink import Sink
from q2api.settings import Settings
from q2api.testing.scripts import text_events

CLAUDE_BODY = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES_BODY = {"model": "claude-sonnet-4-5", "input": "hi"}
CHAT_BODY = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}


class ListSink:
    """A sink (q2api.server.lifecycle.sink) that keeps what it is given, in order."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.ended = False

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        assert self.status is None, "started twice"
        self.status = status
        self.headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}

    async def write(self, chunk: bytes, *, more: bool) -> None:
        assert self.status is not None and not self.ended, "a body chunk outside the answer"
        self.chunks.append(chunk)
        self.ended = not more

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        assert self.ended
        return orjson.loads(self.body)


class _Stream:
    """An opened Amazon Q reply whose body is `frames` (real event-stream frames), one read each;
    `then_hang`: the body then never ends (the upstream goes silent)."""

    request_id = "upstream-req"
    account_id = "account-1"
    account_label = "first"
    time_to_headers = 0.0

    def __init__(self, frames: list[bytes], upstream: _Upstream, *, then_hang: bool) -> None:
        self._frames = frames
        self._upstream = upstream
        self._then_hang = then_hang
        self.upstream_started_at = 0.0

    async def chunks(self) -> Any:
        for frame in self._frames:
            await asyncio.sleep(0)
            yield frame
        if self._then_hang:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self._upstream.cancelled.set()
                raise

    def buffered(self) -> bytes | None:
        return None


class _Upstream:
    """An upstream whose replies never open (the default), open with Amazon Q's refusal (`refusal`),
    or open and send `frames` (then go silent with `then_hang`)."""

    def __init__(
        self, refusal: Exception | None = None, frames: list[bytes] | None = None, *, then_hang: bool = False
    ) -> None:
        self.refusal = refusal
        self.frames = frames
        self.then_hang = then_hang
        self.opened = 0
        self.closed = 0
        self.cancelled = asyncio.Event()

    def open_stream(self, payload: Any, trace: Any = None) -> OpenedReply:
        self.opened += 1
        return cast(OpenedReply, _Opening(self))


class _Opening:
    def __init__(self, upstream: _Upstream) -> None:
        self._upstream = upstream

    async def __aenter__(self) -> Any:
        if self._upstream.refusal is not None:
            raise self._upstream.refusal
        if self._upstream.frames is not None:
            return _Stream(self._upstream.frames, self._upstream, then_hang=self._upstream.then_hang)
        try:
            await asyncio.Event().wait()  # the upstream never answers
        except asyncio.CancelledError:
            self._upstream.cancelled.set()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        pass

    def close(self) -> None:
        self._upstream.closed += 1


def _relay(upstream: _Upstream, logged: list[Exchange]) -> MessagesRelay:
    catalogue = builtin_catalogue()
    return MessagesRelay(
        upstream=upstream, settings=Settings(), models=ModelRouter(lambda: catalogue), on_exchange_logged=logged.append
    )


async def _stays_connected() -> Message:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _has_left() -> Message:
    return {"type": "http.disconnect"}


async def _handle(relay: MessagesRelay, body: dict[str, Any], door: FrontDoor, disconnected: Any) -> ListSink:
    sink = ListSink()
    written: Sink = sink  # a list-backed sink is a sink
    await relay.handle(orjson.dumps(body), "req_test", door, disconnected=disconnected, sink=written)
    return sink


@pytest.mark.parametrize(
    ("door", "body", "envelope_of"),
    [
        (CLAUDE_DOOR, {**CLAUDE_BODY, "max_tokens": "many"}, lambda answer: answer["error"]["message"]),
        (CHAT_DOOR, {**CHAT_BODY, "max_tokens": "many"}, lambda answer: answer["error"]["param"]),
    ],
)
async def test_a_body_its_door_refuses_is_answered_in_its_envelope_without_an_upstream_call(
    door: FrontDoor, body: dict[str, Any], envelope_of: Any
) -> None:
    upstream, logged = _Upstream(), []
    sink = await _handle(_relay(upstream, logged), body, door, _stays_connected)
    assert sink.status == 400 and sink.headers["content-type"] == "application/json"
    assert "max_tokens" in envelope_of(sink.json())
    assert upstream.opened == 0
    assert [(exchange.status, exchange.route) for exchange in logged] == [(400, door.route)]


async def test_a_client_that_has_left_cancels_the_upstream_call_and_is_logged_499() -> None:
    upstream, logged = _Upstream(), []
    sink = await _handle(_relay(upstream, logged), CLAUDE_BODY, CLAUDE_DOOR, _has_left)
    assert sink.status == 499
    assert upstream.opened == 1
    assert upstream.cancelled.is_set()
    assert [(exchange.status, exchange.error) for exchange in logged] == [(499, "client_disconnected")]


@pytest.mark.parametrize(("door", "status"), [(CLAUDE_DOOR, 429), (CHAT_DOOR, 429)])
async def test_an_upstream_refusal_before_the_first_byte_is_a_real_status_in_the_doors_envelope(
    door: FrontDoor, status: int
) -> None:
    refusal = UpstreamHTTPError(429, "ThrottlingException", "Too many requests")
    upstream, logged = _Upstream(refusal), []
    body = CLAUDE_BODY if door is CLAUDE_DOOR else CHAT_BODY
    sink = await _handle(_relay(upstream, logged), body, door, _stays_connected)
    answer = sink.json()
    assert sink.status == status
    assert len(sink.chunks) == 1  # a whole answer, in one chunk
    if door is CLAUDE_DOOR:
        assert answer["type"] == "error" and answer["error"]["type"] == "rate_limit_error"
    else:
        assert answer["error"]["code"] == "rate_limit_exceeded"
    assert [exchange.status for exchange in logged] == [status]


def _frames(*words: str) -> list[bytes]:
    """One Amazon Q text frame per word."""
    return [send.data for word in words for send in text_events(word)]


async def test_a_non_streamed_reply_is_one_json_answer_naming_the_model_that_served_it() -> None:
    upstream, logged = _Upstream(frames=_frames("Hello", " there")), []
    sink = await _handle(_relay(upstream, logged), CLAUDE_BODY, CLAUDE_DOOR, _stays_connected)
    assert sink.status == 200 and len(sink.chunks) == 1
    message = sink.json()
    assert message["type"] == "message" and message["content"][0]["text"] == "Hello there"
    assert sink.headers["x-q2api-upstream-model"]
    assert [exchange.status for exchange in logged] == [200]


@pytest.mark.parametrize(("door", "body"), [(CLAUDE_DOOR, CLAUDE_BODY), (CHAT_DOOR, CHAT_BODY)])
async def test_a_streamed_reply_is_written_chunk_by_chunk_in_its_doors_format(
    door: FrontDoor, body: dict[str, Any]
) -> None:
    upstream, logged = _Upstream(frames=_frames("Hello", " there")), []
    sink = await _handle(_relay(upstream, logged), {**body, "stream": True}, door, _stays_connected)
    assert sink.status == 200 and sink.headers["content-type"].startswith("text/event-stream")
    assert sink.ended and len(sink.chunks) > 1  # streamed, not one aggregated body
    text = sink.body.decode()
    if door is CLAUDE_DOOR:
        assert "event: message_start" in text and text.rstrip().endswith('data: {"type":"message_stop"}')
    else:
        assert text.endswith("data: [DONE]\n\n")
    assert '"Hello"' in text and '" there"' in text
    assert upstream.closed >= 1  # the upstream reply is closed once the stream ends
    assert [exchange.status for exchange in logged] == [200]


async def test_a_client_that_leaves_mid_stream_ends_it_and_closes_the_upstream() -> None:
    upstream, logged = _Upstream(frames=_frames("Hello", " there"), then_hang=True), []
    left = asyncio.Event()

    async def leaves_after_the_first_bytes() -> Message:
        await left.wait()
        return {"type": "http.disconnect"}

    class LeavingSink(ListSink):
        async def write(self, chunk: bytes, *, more: bool) -> None:
            await super().write(chunk, more=more)
            if b"Hello" in self.body:
                left.set()

    sink = LeavingSink()
    relay = _relay(upstream, logged)
    body = orjson.dumps({**CLAUDE_BODY, "stream": True})
    await asyncio.wait_for(
        relay.handle(body, "req_test", CLAUDE_DOOR, disconnected=leaves_after_the_first_bytes, sink=sink), 30
    )
    assert sink.status == 200 and not sink.ended  # the body was never finished: nobody is left to read it
    assert upstream.cancelled.is_set() and upstream.closed >= 1
    assert [(exchange.status, exchange.error) for exchange in logged] == [(499, "client_disconnected")]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_doors_after_hook_gets_the_call_and_its_finished_answer_before_the_last_byte(stream: bool) -> None:
    upstream, logged = _Upstream(frames=_frames("Hello", " there")), []
    sink = ListSink()
    seen: list[tuple[DoorCall, Any, bool]] = []

    async def after(call: DoorCall, answer: object) -> None:
        seen.append((call, answer, sink.ended))

    body = orjson.dumps({**RESPONSES_BODY, "stream": stream})
    relay = _relay(upstream, logged)
    await relay.handle(body, "req_test", RESPONSES_DOOR, disconnected=_stays_connected, sink=sink, after=after)
    [(call, answer, ended)] = seen
    assert not ended  # stored before the client can read the end and continue it
    assert isinstance(call, ResponsesCall) and answer["id"] == call.frame.response_id
    assert answer["status"] == "completed" and answer["output"][0]["content"][0]["text"] == "Hello there"
    if stream:
        assert b"response.completed" in sink.body
    else:
        assert sink.json() == answer


async def test_a_doors_after_hook_is_not_awaited_for_a_refused_reply() -> None:
    upstream, logged = _Upstream(UpstreamHTTPError(429, "ThrottlingException", "Too many requests")), []
    sink, seen = ListSink(), []

    async def after(call: DoorCall, answer: object) -> None:
        seen.append(answer)

    body = orjson.dumps({**RESPONSES_BODY, "stream": True})
    relay = _relay(upstream, logged)
    await relay.handle(body, "req_test", RESPONSES_DOOR, disconnected=_stays_connected, sink=sink, after=after)
    assert sink.status == 429 and sink.json()["error"]["code"] == "rate_limit_exceeded"
    assert seen == []


async def test_the_responses_door_read_on_its_own_refuses_a_continued_conversation_by_name() -> None:
    upstream, logged = _Upstream(), []
    sink = await _handle(
        _relay(upstream, logged), {**RESPONSES_BODY, "previous_response_id": "resp_1"}, RESPONSES_DOOR, _stays_connected
    )
    assert sink.status == 400 and sink.json()["error"]["param"] == "previous_response_id"
    assert upstream.opened == 0
