"""ReplyStream on its own, with a scripted reply and scripted ASGI callables.

Each test is a way a streaming client can end a request early; in every one the
reply must be closed (which closes the upstream request) promptly, once, with the
reason that goes into the log line.
"""

from __future__ import annotations

import asyncio

from q2api.anthropic.sse import SseEncoder
from q2api.server.lifecycle.streaming import ReplyStream

SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "method": "POST", "headers": []}
TEXT_EVENT = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x" * 100}}


class ScriptedReply:
    """Stands in for server.reply.Reply: `reads` batches, each available at once, or a stall."""

    def __init__(self, reads: int = 10**6, *, stall: bool = False) -> None:
        self.remaining = reads
        self.stall = stall
        self.reads = 0
        self.closed: list[str | None] = []

    @property
    def finished(self) -> bool:
        return self.remaining == 0

    async def read(self, timeout: float | None = None) -> list[dict]:
        if self.stall:
            await asyncio.sleep(3600)
        self.reads += 1
        self.remaining -= 1
        # The upstream always has data ready: like the pump, the read only yields to the loop once.
        await asyncio.sleep(0)
        return [TEXT_EVENT]

    def sent(self, size: int) -> None:
        pass

    def close(self, *, error=None, abandoned=None) -> None:
        self.closed.append(abandoned)


def stream_of(reply: ScriptedReply, *, send_timeout: float = 30.0) -> ReplyStream:
    return ReplyStream(reply, [], SseEncoder(), ping_interval=10.0, send_timeout=send_timeout)  # type: ignore[arg-type]


async def test_reply_is_closed_even_when_the_response_never_started() -> None:
    reply = ScriptedReply(stall=True)

    async def gone_client() -> dict:
        return {"type": "http.disconnect"}

    async def unaccepting_socket(message: dict) -> None:
        await asyncio.sleep(5)  # the client's socket never accepts the response start

    await asyncio.wait_for(stream_of(reply)(SCOPE, gone_client, unaccepting_socket), timeout=2)
    assert reply.closed == ["client_disconnected"]
    assert reply.reads == 0


async def test_a_client_that_leaves_stops_a_fast_upstream_within_one_chunk() -> None:
    # uvicorn's send() returns at once after a disconnect, and the reads never wait for data:
    # the stream must still notice the disconnect and stop reading the upstream.
    reply = ScriptedReply()
    writes = 0
    left = asyncio.Event()

    async def client() -> dict:
        await left.wait()
        return {"type": "http.disconnect"}

    async def socket(message: dict) -> None:
        nonlocal writes
        if message["type"] == "http.response.body":
            writes += 1
            if writes == 50:
                left.set()  # the client reads 50 chunks, then goes away

    await asyncio.wait_for(stream_of(reply)(SCOPE, client, socket), timeout=5)
    assert reply.closed == ["client_disconnected"]
    assert writes <= 52  # within a chunk (plus the one already being written) of the disconnect


async def test_a_client_that_stops_reading_ends_the_request_after_the_send_timeout() -> None:
    reply = ScriptedReply()
    writes = 0

    async def connected_client() -> dict:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def full_socket(message: dict) -> None:
        nonlocal writes
        if message["type"] == "http.response.body":
            writes += 1
            if writes > 3:
                await asyncio.sleep(3600)  # the socket buffer is full: the client reads nothing

    await asyncio.wait_for(stream_of(reply, send_timeout=0.3)(SCOPE, connected_client, full_socket), timeout=5)
    assert reply.closed == ["client_stalled"]
    assert reply.reads == 4  # the fourth batch is the write that never completed


async def test_a_finished_reply_ends_the_body_and_closes_once() -> None:
    reply = ScriptedReply(reads=3)
    messages: list[dict] = []

    async def connected_client() -> dict:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def socket(message: dict) -> None:
        messages.append(message)

    await asyncio.wait_for(stream_of(reply)(SCOPE, connected_client, socket), timeout=5)
    assert reply.closed == [None]
    assert messages[0]["type"] == "http.response.start" and messages[0]["status"] == 200
    # The last events' write also ends the body: no empty write of its own.
    bodies = messages[1:]
    assert [message["more_body"] for message in bodies] == [True, True, False]
    assert all(message["body"] for message in bodies)
    assert sum(message["body"].count(b"event: content_block_delta") for message in bodies) == 3


async def test_a_cancellation_from_outside_is_not_swallowed() -> None:
    reply = ScriptedReply(stall=True)

    async def connected_client() -> dict:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def socket(message: dict) -> None:
        pass

    task = asyncio.ensure_future(stream_of(reply)(SCOPE, connected_client, socket))
    await asyncio.sleep(0.05)
    task.cancel()
    done, _ = await asyncio.wait((task,), timeout=2)
    assert done and task.cancelled()
    assert reply.closed == [None]  # closed, and not blamed on the client
