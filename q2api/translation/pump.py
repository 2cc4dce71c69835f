"""Upstream bytes → decoded frames → Claude events, one batch per upstream read.

The pump owns the only place where I/O failures of the reply (timeouts, a
dropped connection, a corrupt frame, a body cut mid-frame) become translator
failures, so every such fault ends as a closed block plus an `error` event and
never as a normal-looking end. A fault of our own while decoding or translating
ends the same way (an `error` event, never a torn HTTP body the SDKs cannot parse).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import aiohttp
from loguru import logger

from q2api.amazonq.errors import UpstreamError
from q2api.amazonq.eventstream import EventStreamDecoder, EventStreamError
from q2api.amazonq.wait_deadline import WaitDeadline
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import StreamEvent, error_event
from q2api.translation.error_mapping import (
    broken_reply,
    corrupt_stream,
    cut_off,
    internal_failure,
    map_upstream_exception,
)
from q2api.translation.translator import StreamTranslator

Events = list[StreamEvent]
_T = TypeVar("_T")


def _nothing_buffered() -> bytes | None:
    return None


class ReplyPump:
    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        translator: StreamTranslator,
        buffered: Callable[[], bytes | None] = _nothing_buffered,
    ) -> None:
        """`chunks` waits for body bytes; `buffered` takes those already received, without waiting."""
        self._chunks = chunks
        self._buffered = buffered
        self._translator = translator
        self._decoder = EventStreamDecoder()
        self._deadline = WaitDeadline()  # one lazy timer for every timed read (wait_deadline.py)
        self._internal_failure: AnthropicError | None = None

    @property
    def finished(self) -> bool:
        """No more events will come: the translator ended the reply, or a fault of our own did."""
        return self._translator.finished or self._internal_failure is not None

    @property
    def failure(self) -> AnthropicError | None:
        """Why the reply failed (the translator's verdict, or a fault of our own), or None."""
        return self._internal_failure or self._translator.failure

    async def read(self, timeout: float | None = None) -> Events | None:
        """The next batch of events, or None if `timeout` passed first.

        Every read lets the event loop run at least once: it waits for body
        bytes, or, when they were already buffered, yields bare. A task reading
        a fast upstream therefore never starves the loop, which the stream's
        disconnect watcher relies on (q2api.server.lifecycle.streaming); and bytes already
        there need no timer.

        A read that times out loses nothing: the only await inside is aiohttp's
        wait for body bytes, which leaves any data in its buffer when cancelled,
        and decoding and translating never await. (A task plus `asyncio.wait`
        per read would also be safe, at twice the cost on the hot path.)
        """
        chunk = self._buffered()
        if chunk is not None:
            await asyncio.sleep(0)
            return self._guarded(self._translate, chunk)
        if timeout is None:
            return await self._next_batch()
        deadline = self._deadline
        deadline.begin(asyncio.get_running_loop().time() + timeout)
        try:
            return await self._next_batch()
        except asyncio.CancelledError:
            if deadline.expired():
                return None
            raise
        finally:
            deadline.end()

    def close(self) -> None:
        """Let go of the read timer now rather than when it next fires (a later timed read arms another)."""
        self._deadline.close()

    async def _next_batch(self) -> Events:
        try:
            chunk = await self._chunks.__anext__()
        except (StopAsyncIteration, UpstreamError, aiohttp.ClientError) as exc:
            return self._guarded(self._read_ended, exc)
        return self._guarded(self._translate, chunk)

    def _guarded(self, work: Callable[[_T], Events], argument: _T) -> Events:
        try:
            return work(argument)
        except Exception as exc:  # a bug in decoding or translation, not a fault of the reply
            logger.opt(exception=exc).error("translating Amazon Q's reply failed")
            return self._fail_internally()

    def _read_ended(self, reason: Exception) -> Events:
        if isinstance(reason, StopAsyncIteration):
            return self._end_of_body()
        if isinstance(reason, UpstreamError):  # a between-frames timeout or a dropped connection
            return self._fail(map_upstream_exception(reason, context_window=self._translator.context_window))
        return self._fail(broken_reply(reason))

    def _translate(self, chunk: bytes) -> Events:
        try:
            frames = self._decoder.feed(chunk)
        except EventStreamError as exc:
            # Deliver the whole frames that preceded the fault, then end with an error.
            events = self._translator.feed_all(exc.frames)
            if self._translator.finished:
                return events
            return events + self._fail(corrupt_stream(exc))
        return self._translator.feed_all(frames)

    def _end_of_body(self) -> Events:
        try:
            self._decoder.close()
        except EventStreamError as exc:
            return self._fail(cut_off(exc))
        return self._translator.finish()

    def _fail(self, error: AnthropicError) -> Events:
        return self._translator.fail(error)

    def _fail_internally(self) -> Events:
        # The translator's state is suspect, so the error event is built here, not by it.
        error = internal_failure()
        self._internal_failure = error
        return [error_event(error.error_type, error.message)]
