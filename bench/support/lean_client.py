"""The benchmark's HTTP client: raw asyncio over TCP, prebuilt request bytes, timed as the bytes arrive.

Not aiohttp, and not the `anthropic` SDK: aiohttp needs about 40 ms of its own
CPU to launch 100 requests, so at 100 streams started together it measured
itself (the simulator alone showed a TTFT p99 of 42 ms where an independent
load generator saw 16 ms), and the SDK builds a pydantic object per event.

Each stream opens its own TCP connection (as Claude Code does when it starts),
writes one prebuilt HTTP/1.1 request (`Content-Length`, `Connection: close`)
and reads the reply in an `asyncio.Protocol`: the status line, the framing
headers, then the body de-chunked just enough to count the text markers in it
(a marker may straddle two reads) and to see where it ends. The clock is
`time.monotonic()` — CLOCK_MONOTONIC on Linux, one clock for every process of
the run, so the client processes of one wave share its start.

Timings, per stream:
  connect  connection opened -> established (a listen queue that overflowed shows as >= 1 s: a SYN retried)
  ttft     connection opened -> first read carrying text
  max_gap  the longest wait between two consecutive reads carrying text
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import cast

from bench.support.http_body import HEAD_END, BodyReader, MalformedReply, parse_head

# What marks text in a reply: a Claude text delta from the gateway, a text frame from the simulator.
GATEWAY_TEXT = b'"text_delta"'
UPSTREAM_TEXT = b"assistantResponseEvent"
# What marks an error inside a 200 reply: an SSE error event, an event-stream exception frame.
GATEWAY_ERROR = b"event: error"
UPSTREAM_ERROR = b":exception-type"
# What marks a reply's last event: the Claude message_stop, the simulator's usage frame (always last).
GATEWAY_END = b"event: message_stop"
UPSTREAM_END = b"metadataEvent"  # not the "messageMetadataEvent" that opens the reply: case differs
GATEWAY_MARKERS = (GATEWAY_TEXT, GATEWAY_ERROR, GATEWAY_END)
UPSTREAM_MARKERS = (UPSTREAM_TEXT, UPSTREAM_ERROR, UPSTREAM_END)
# Head bytes allowed before the reply is called malformed.
MAX_HEAD = 64 * 1024


@dataclasses.dataclass(frozen=True)
class Target:
    """One way to get a streamed reply: the address and the whole request, as bytes, ready to write."""

    name: str
    host: str
    port: int
    request: bytes
    body_bytes: int
    text_marker: bytes
    error_marker: bytes
    end_marker: bytes


def post_target(
    name: str, host: str, port: int, path: str, headers: dict[str, str], body: bytes, markers: tuple[bytes, ...]
) -> Target:
    """A POST of `body`; `markers` are (text, error, end), e.g. GATEWAY_MARKERS."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{key}: {value}" for key, value in headers.items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close"]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return Target(name, host, port, head + body, len(body), *markers)


@dataclasses.dataclass(slots=True)
class StreamResult:
    started: float = 0.0  # seconds after its wave began
    late: float = 0.0  # how long after its scheduled start the client opened it (the client's own delay)
    connect: float | None = None
    ttft: float | None = None
    max_gap: float = 0.0
    texts: int = 0
    error: str | None = None


class _ReplyReader(asyncio.Protocol):
    """Writes the request once connected, then times and checks the reply read by read."""

    def __init__(self, target: Target, expected_texts: int, result: StreamResult, opened: float) -> None:
        self._target = target
        self._expected = expected_texts
        self._result = result
        self._opened = opened
        # A marker may straddle two reads: that many bytes of the previous one are searched again.
        self._keep = max(len(target.text_marker), len(target.error_marker), len(target.end_marker)) - 1
        self._ended = False
        self._tail = b""
        self._last_text = 0.0
        self._head: bytes | None = b""  # None once the head has been read
        self._status = 0
        self._body: BodyReader | None = None
        self._error_body = b""
        self._transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._result.connect = time.monotonic() - self._opened
        # uvloop's transports do not derive from asyncio.Transport, though they are one.
        self._transport = cast(asyncio.Transport, transport)
        self._transport.write(self._target.request)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if self.done.done():
            return
        try:
            if self._head is not None:
                self._head += data
                end = self._head.find(HEAD_END)
                if end < 0:
                    if len(self._head) > MAX_HEAD:
                        raise MalformedReply("no end of headers")
                    return
                self._status, chunked, length = parse_head(self._head[:end])
                data = self._head[end + len(HEAD_END) :]
                self._head = None
                self._body = BodyReader(chunked, length)
            assert self._body is not None
            self._take(self._body.feed(data), now)
        except MalformedReply as exc:
            self._finish(f"malformed reply: {exc}")
            return
        if self._body.complete:
            self._finish(None)

    def _take(self, payload: bytes, now: float) -> None:
        if self._status != 200:
            self._error_body = (self._error_body + payload)[:300]
            return
        tail = self._tail
        window = tail + payload if tail else payload
        self._tail = window[-self._keep :]
        if self._target.error_marker in window:
            self._result.error = f"an error inside the reply: {window[:300]!r}"
        if self._target.end_marker in window:
            self._ended = True
        # The tail is longer than the text marker, so it may hold a whole one, counted with the last read.
        found = window.count(self._target.text_marker) - tail.count(self._target.text_marker)
        if not found:
            return
        result = self._result
        if result.ttft is None:
            result.ttft = now - self._opened
        else:
            result.max_gap = max(result.max_gap, now - self._last_text)
        self._last_text = now
        result.texts += found

    def eof_received(self) -> bool:
        self._finish("the server closed the connection before the reply ended")
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"connection lost: {type(exc).__name__}: {exc}" if exc else "connection closed"
        self._finish(reason + " before the reply ended")

    def _finish(self, problem: str | None) -> None:
        if self.done.done():
            return
        result = self._result
        if self._head is not None:
            problem = problem or "no reply"
            result.error = result.error or f"{problem} (no status line)"
        elif self._status != 200:
            result.error = f"HTTP {self._status}: {self._error_body[:200]!r}"
        elif problem:
            result.error = result.error or problem
        elif not self._ended:
            result.error = result.error or "the reply ended without its last event"
        elif result.texts < self._expected:
            result.error = result.error or f"{result.texts} texts, {self._expected} expected"
        self.done.set_result(None)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def close_soon(self) -> None:
        """The reply is read: the server closes (`Connection: close`), or we do after a moment.

        Letting the server close first keeps TIME_WAIT on its side and not on
        the client's ephemeral ports, which thousands of streams a minute use up.
        """
        transport = self._transport
        if transport is not None and not transport.is_closing():
            asyncio.get_running_loop().call_later(2.0, transport.close)


async def stream_once(
    target: Target,
    expected_texts: int = 1,
    wave_start: float | None = None,
    timeout: float = 120.0,
    scheduled: float | None = None,
) -> StreamResult:
    """One request on a fresh connection, read to the end; errors are in the result, never raised."""
    opened = time.monotonic()
    result = StreamResult(
        started=opened - (wave_start if wave_start is not None else opened),
        late=opened - scheduled if scheduled is not None else 0.0,
    )
    loop = asyncio.get_running_loop()
    reader = _ReplyReader(target, expected_texts, result, opened)
    try:
        await asyncio.wait_for(loop.create_connection(lambda: reader, target.host, target.port), timeout)
    except (TimeoutError, OSError) as exc:
        result.error = f"connect: {type(exc).__name__}: {exc}"
        return result
    try:
        await asyncio.wait_for(asyncio.shield(reader.done), max(timeout - (time.monotonic() - opened), 0.001))
    except TimeoutError:
        result.error = f"no end of reply within {timeout:g} s"
        reader.abort()
        return result
    reader.close_soon()
    return result


async def checked(target: Target, expected_texts: int = 1) -> StreamResult:
    """One request that must succeed: the benchmark cannot go on without it."""
    result = await stream_once(target, expected_texts)
    if result.error:
        raise RuntimeError(f"a benchmark request to the {target.name} failed: {result.error}")
    return result


async def wave(
    target: Target,
    streams: int,
    interval: float,
    expected_texts: int,
    begin: float | None = None,
    first: int = 0,
    stride: int = 1,
    timeout: float = 120.0,
) -> list[StreamResult]:
    """Streams number first, first+stride, … of a wave that starts one every `interval` s from `begin`.

    All at once when `interval` is 0. Several processes share one wave by
    taking every `stride`-th stream each, with the same `begin`.
    """
    begin = time.monotonic() if begin is None else begin
    tasks = []
    for index in range(first, first + streams * stride, stride):
        due = begin + index * interval
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(stream_once(target, expected_texts, begin, timeout, due)))
    return list(await asyncio.gather(*tasks))


async def batch(target: Target, requests: int, concurrency: int, expected_texts: int) -> list[StreamResult]:
    """`requests` streams, `concurrency` of them open at any time, each starting as another ends."""
    results: list[StreamResult] = []
    remaining = iter(range(requests))

    async def worker() -> None:
        for _ in remaining:
            results.append(await stream_once(target, expected_texts))

    await asyncio.gather(*(worker() for _ in range(min(concurrency, requests))))
    return results
