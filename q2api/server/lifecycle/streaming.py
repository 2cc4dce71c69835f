"""A reply streamed to the client, into the request's sink (q2api.server.lifecycle.sink; as a
pure-ASGI response too, for the ASGI sink).

What Starlette's `StreamingResponse` cannot promise, this does:

* a client that leaves stops the upstream read within one chunk. uvicorn's
  `send()` returns quietly once the client is gone, and an upstream with data
  buffered never makes the body await, so a listener task would never get to
  run; every read therefore yields to the loop at least once (the pump's
  promise, q2api.translation.pump), and the listener cancels the body directly (an asyncio cancel lands even on a task whose
  awaited read has already completed, unlike a cancel scope's);
* a client that stops reading ends the request after `send_timeout` seconds of
  no progress (uvicorn's `send()` waits for the socket to drain forever);
* pings while Amazon Q is silent, and one write per upstream read.

The encoder turns Claude stream events into the wire format of the front door
(Claude SSE here; another door brings its own).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Sequence

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from q2api.anthropic.events import StreamEvent
from q2api.frontdoors.door import EventEncoder
from q2api.server import metrics
from q2api.server.lifecycle.off_loop import run_off_loop
from q2api.server.lifecycle.reply import Reply
from q2api.server.lifecycle.sink import AsgiSink, Sink


class Abandoned(enum.StrEnum):
    CLIENT_DISCONNECTED = "client_disconnected"
    CLIENT_STALLED = "client_stalled"


class ReplyStream(Response):
    media_type = "text/event-stream"

    def __init__(
        self,
        reply: Reply,
        held: list[StreamEvent],
        encoder: EventEncoder,
        *,
        ping_interval: float,
        send_timeout: float,
        headers: dict[str, str] | None = None,
        end_off_loop: bool = False,
        after: Callable[[object], Awaitable[None]] | None = None,
    ) -> None:
        """`end_off_loop`: the events that end the reply are encoded in a worker thread (the encoder
        checks the whole reply there, at a cost the client chose). `after` is awaited with the
        encoder's `answer()` before the last write of a reply that succeeded (with one to give)."""
        self._reply = reply
        self._end_off_loop = end_off_loop
        self._after = after
        self._held = held
        self._encoder = encoder
        self._ping_interval = ping_interval
        self._send_timeout = send_timeout
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-cache", **(headers or {})})
        self._abandoned: Abandoned | None = None
        self._sending_since: float | None = None  # loop time a write began, while it is pending

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.into(AsgiSink(send), receive)

    async def into(self, sink: Sink, disconnected: Receive) -> None:
        """Stream the reply into `sink`; `disconnected` (an ASGI `receive`) tells the client left."""
        receive = disconnected
        body = asyncio.current_task()
        assert body is not None
        watcher = asyncio.ensure_future(self._watch(receive, body))
        metrics.stream_started()
        try:
            await self._stream(sink)
        except asyncio.CancelledError:
            # Our own cancel (the client left or stalled) ends the request quietly; any other propagates.
            if self._abandoned is None or body.uncancel() > 0:
                raise
        finally:
            metrics.stream_finished()
            watcher.cancel()
            self._reply.close(abandoned=self._abandoned)

    async def _stream(self, sink: Sink) -> None:
        reply, encoder = self._reply, self._encoder
        loop = asyncio.get_running_loop()
        await sink.start(200, self.raw_headers)
        chunk = await self._encode_end(self._held) if self._end_off_loop else encoder.encode(self._held)
        self._held = []
        while True:
            last = reply.finished
            if last:
                # The end of the body rides on the last events' write: one socket write, not two.
                chunk += encoder.trailer()
                if self._after is not None and reply.failure is None:
                    answer = encoder.answer()
                    if answer is not None:
                        await self._after(answer)
            if chunk or last:
                self._sending_since = loop.time()
                await sink.write(chunk, more=not last)
                self._sending_since = None
                reply.sent(len(chunk))
            if last or self._abandoned is not None:
                return
            events = await reply.read(timeout=self._ping_interval)
            if events and self._end_off_loop:
                chunk = await self._encode_end(events)
            else:
                chunk = encoder.ping if events is None else encoder.encode(events) if events else b""

    async def _encode_end(self, events: Sequence[StreamEvent]) -> bytes:
        if any(event["type"] == "message_delta" for event in events):
            return await run_off_loop(self._encoder.encode, events)
        return self._encoder.encode(events)

    async def _watch(self, receive: Receive, body: asyncio.Task[None]) -> None:
        """End the body when the client disconnects, or when a write makes no progress for too long."""
        loop = asyncio.get_running_loop()
        check_every = min(5.0, self._send_timeout / 4)
        message: asyncio.Future[Message] = asyncio.ensure_future(receive())
        try:
            while True:
                done, _ = await asyncio.wait((message,), timeout=check_every)
                if done:
                    if message.result()["type"] == "http.disconnect":
                        self._abandon(Abandoned.CLIENT_DISCONNECTED, body)
                        return
                    message = asyncio.ensure_future(receive())
                    continue
                since = self._sending_since
                if since is not None and loop.time() - since > self._send_timeout:
                    self._abandon(Abandoned.CLIENT_STALLED, body)
                    return
        finally:
            message.cancel()

    def _abandon(self, why: Abandoned, body: asyncio.Task[None]) -> None:
        self._abandoned = why
        body.cancel()
