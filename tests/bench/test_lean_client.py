"""The benchmark's lean HTTP client reads what it times correctly (bench/support/lean_client.py, http_body.py).

No timing is asserted: only that replies are framed, counted and judged right,
whichever way the bytes are split into reads.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.support.http_body import BodyReader, MalformedReply, parse_head
from bench.support.lean_client import GATEWAY_MARKERS, StreamResult, Target, _ReplyReader, post_target, stream_once
from bench.support.report import percentile
from bench.support.wave_summary import WaveSummary

EVENTS = [
    b'event: content_block_delta\ndata: {"delta":{"type":"text_delta","text":"a"}}\n\n',
    b'event: content_block_delta\ndata: {"delta":{"type":"text_delta","text":"b"}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def target(port: int = 1) -> Target:
    return post_target("gateway", "127.0.0.1", port, "/v1/messages", {"x-api-key": "k"}, b"{}", GATEWAY_MARKERS)


class FakeTransport:
    def __init__(self) -> None:
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def read(reply: bytes, split: int, expected_texts: int = 1) -> StreamResult:
    """Feed `reply` to the protocol in reads of `split` bytes."""
    result = StreamResult()
    reader = _ReplyReader(target(), expected_texts, result, opened=0.0)
    reader.connection_made(FakeTransport())  # type: ignore[arg-type]
    for start in range(0, len(reply), split):
        reader.data_received(reply[start : start + split])
    if not reader.done.done():
        reader.connection_lost(None)
    return result


def test_the_request_is_prebuilt_with_its_length_and_connection_close():
    request = target().request
    head, body = request.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:1\r\n")
    assert b"Content-Length: 2" in head and b"Connection: close" in head and body == b"{}"


@pytest.mark.parametrize("split", [1, 2, 7, 64, 10_000])
def test_a_chunked_body_is_the_same_whatever_the_reads(split):
    body = chunked(*EVENTS)
    reader = BodyReader(chunked=True, length=None)
    payload = b"".join(reader.feed(body[start : start + split]) for start in range(0, len(body), split))
    assert payload == b"".join(EVENTS) and reader.complete


def test_a_sized_body_ends_at_its_length_and_a_bad_chunk_size_is_malformed():
    reader = BodyReader(chunked=False, length=5)
    assert reader.feed(b"abc") == b"abc" and not reader.complete
    assert reader.feed(b"defgh") == b"de" and reader.complete
    with pytest.raises(MalformedReply):
        BodyReader(chunked=True, length=None).feed(b"zz\r\n")
    assert parse_head(b"HTTP/1.1 503 Busy\r\nContent-Length: 3") == (503, False, 3)


@pytest.mark.parametrize("split", [1, 5, 33, 10_000])
async def test_texts_are_counted_even_when_a_marker_straddles_two_reads(split):
    result = await read(HEAD + chunked(*EVENTS), split)
    assert result.error is None and result.texts == 2 and result.ttft is not None


async def test_a_reply_without_its_last_event_or_with_too_few_texts_is_an_error():
    cut = await read(HEAD + chunked(*EVENTS[:2]), 10_000)
    assert cut.error == "the reply ended without its last event"
    short = await read(HEAD + chunked(*EVENTS), 10_000, expected_texts=3)
    assert short.error == "2 texts, 3 expected"


async def test_an_error_status_an_error_event_and_a_dropped_connection_are_errors():
    refused = await read(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy", 3)
    assert refused.error == "HTTP 503: b'busy'"
    error_event = await read(HEAD + chunked(b"event: error\ndata: {}\n\n", EVENTS[2]), 10_000)
    assert error_event.error is not None and error_event.error.startswith("an error inside the reply")
    dropped = await read(HEAD + b"%x\r\n%s\r\n" % (len(EVENTS[0]), EVENTS[0]), 10_000)
    assert dropped.error == "connection closed before the reply ended"


async def test_a_stream_over_real_tcp_and_a_refused_connection():
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n{}")
        writer.write(HEAD)
        for event in EVENTS:
            writer.write(chunked(event)[: -len(b"0\r\n\r\n")])
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        result = await stream_once(target(port), timeout=10)
    assert result.error is None and result.texts == 2 and result.connect is not None
    refused = await stream_once(target(port), timeout=10)
    assert refused.error is not None and refused.error.startswith("connect:")


def test_percentiles_are_nearest_rank_and_a_wave_says_why_it_misses():
    assert percentile([float(value) for value in range(1, 101)], 0.99) == 99.0
    results = [StreamResult(ttft=0.01 * index, max_gap=0.1, texts=5) for index in range(1, 101)]
    results.append(StreamResult(error="HTTP 503: b''"))
    summary = WaveSummary.of(results)
    assert summary.failed == 1 and summary.ttft_p99 == pytest.approx(0.99)
    assert summary.shortfalls(ttft_limit=0.5, gap_limit=0.2) == [
        "1 of 101 FAILED: 1x HTTP 503: b''",
        "TTFT p99 990 ms > 500 ms",
    ]
