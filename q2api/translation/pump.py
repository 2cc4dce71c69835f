"""Upstream bytes → decoded frames → Claude events, one batch per upstream read.

The pump owns the only place where I/O failures of the reply (timeouts, a
dropped connection, a corrupt frame, a body cut mid-frame) become translator
failures, so every such fault ends as a closed block plus an `error` event and
never as a normal-looking end. A fault of our own while decoding or translating
ends the same way (an `error` event, never a torn HTTP body the SDKs cannot parse).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
from loguru import logger

from q2api.amazonq.errors import UpstreamError
from q2api.amazonq.eventstream import EventStreamDecoder, EventStreamError
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


class ReplyPump:
    def __init__(self, chunks: AsyncIterator[bytes], translator: StreamTranslator) -> None:
        self._chunks = chunks
        self._translator = translator
        self._decoder = EventStreamDecoder()
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

        A read that times out loses nothing: the only await inside is aiohttp's
        wait for body bytes, which leaves any data in its buffer when cancelled,
        and decoding and translating never await. (A task plus `asyncio.wait`
        per read would also be safe, at twice the cost on the hot path.)
        """
        try:
            async with asyncio.timeout(timeout):
                return await self._next_batch()
        except TimeoutError:
            return None

    async def _next_batch(self) -> Events:
        try:
            return await self._translate_next_read()
        except Exception as exc:  # a bug in decoding or translation, not a fault of the reply
            logger.opt(exception=exc).error("translating Amazon Q's reply failed")
            return self._fail_internally()

    async def _translate_next_read(self) -> Events:
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            return self._end_of_body()
        except UpstreamError as exc:  # a between-frames timeout or a dropped connection
            return self._fail(map_upstream_exception(exc, context_window=self._translator.context_window))
        except aiohttp.ClientError as exc:
            return self._fail(broken_reply(exc))

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
