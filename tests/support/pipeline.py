"""Helpers for the response-pipeline tests (no tests here).

`run_pipeline` drives upstream bytes through the real decoder and translator
the way the app's reply pump does (a decode error becomes `fail()`), and
`SdkLoopback` serves the resulting SSE bytes on 127.0.0.1 to a real
`anthropic.Anthropic` client, so the official SDK's own parser and
accumulator judge the stream.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import orjson

from q2api.amazonq.eventstream import EventStreamDecoder, EventStreamError, encode_event
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.message_aggregator import MessageAggregator
from q2api.anthropic.sse import encode_sse
from q2api.translation.pump import ReplyPump
from q2api.translation.translator import StreamTranslator

MODEL = "claude-sonnet-5-5"


def text_event(content: str) -> bytes:
    return encode_event("assistantResponseEvent", {"content": content})


def tool_event(tool_use_id: str, name: str, input: Any = None, stop: bool | None = None) -> bytes:
    payload: dict[str, Any] = {"toolUseId": tool_use_id, "name": name}
    if input is not None:
        payload["input"] = input
    if stop is not None:
        payload["stop"] = stop
    return encode_event("toolUseEvent", payload)


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


def make_translator(**options: Any) -> StreamTranslator:
    options.setdefault("model", MODEL)
    options.setdefault("input_tokens", 42)
    options.setdefault("message_id", "msg_test")
    return StreamTranslator(**options)


def run_pipeline(
    upstream: bytes | Sequence[bytes],
    *,
    cuts: Iterable[int] = (),
    translator: StreamTranslator | None = None,
    per_frame: bool = False,
    **options: Any,
) -> list[dict[str, Any]]:
    """Bytes → the app's own `ReplyPump` (decoder + `feed_all`) → events, one read per piece.

    `per_frame=True` instead feeds the decoded frames one by one through `feed`,
    the translator's other entry point.
    """
    data = upstream if isinstance(upstream, bytes) else b"".join(upstream)
    pieces = split_at(data, cuts)
    translator = translator or make_translator(**options)
    if per_frame:
        return _run_frame_by_frame(pieces, translator)

    async def pump_all() -> list[dict[str, Any]]:
        async def reads() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        pump = ReplyPump(reads(), translator)
        events = translator.start()
        while not pump.finished:
            events += await pump.read() or ()
        return events

    return asyncio.run(pump_all())


def _run_frame_by_frame(pieces: list[bytes], translator: StreamTranslator) -> list[dict[str, Any]]:
    decoder = EventStreamDecoder()
    events = translator.start()
    for chunk in pieces:
        try:
            frames = decoder.feed(chunk)
        except EventStreamError as fault:
            for frame in fault.frames:
                events += translator.feed(frame)
            return events + translator.fail(AnthropicError(502, f"Amazon Q sent a corrupt event stream: {fault}"))
        for frame in frames:
            events += translator.feed(frame)
        if translator.finished:
            return events
    try:
        decoder.close()
    except EventStreamError as fault:
        return events + translator.fail(AnthropicError(502, f"cut off mid-frame: {fault}"))
    return events + translator.finish()


def coalesced(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with consecutive text/thinking deltas of one block joined (chunking-independent form)."""
    out: list[dict[str, Any]] = []
    for event in events:
        previous = out[-1] if out else None
        if (
            previous is not None
            and event["type"] == "content_block_delta"
            and previous["type"] == "content_block_delta"
            and previous["index"] == event["index"]
            and previous["delta"]["type"] == event["delta"]["type"]
            and event["delta"]["type"] in ("text_delta", "thinking_delta")
        ):
            key = "text" if event["delta"]["type"] == "text_delta" else "thinking"
            merged = dict(previous["delta"])
            merged[key] += event["delta"][key]
            out[-1] = {**previous, "delta": merged}
        else:
            out.append(event)
    return out


def aggregate(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    aggregator = MessageAggregator()
    aggregator.add_all(events)
    return aggregator.message()


def strip_none(value: Any) -> Any:
    """Drop None-valued keys (the SDK's optional fields), but never inside tool input."""
    if isinstance(value, dict):
        return {k: v if k == "input" else strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_none(v) for v in value]
    return value


class SdkLoopback:
    """A one-route HTTP server on 127.0.0.1 that replays SSE bodies to the real SDK."""

    def __init__(self) -> None:
        self._bodies: dict[str, bytes] = {}
        self._counter = 0
        self._lock = threading.Lock()
        bodies = self._bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = bodies.pop(self.headers.get("x-test-body", ""), None)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.client = anthropic.Anthropic(api_key="test-key", base_url=f"http://{host}:{port}", max_retries=0)

    def stream(self, sse: bytes) -> Any:
        """The SDK's `messages.stream(...)` over `sse` (a context manager)."""
        with self._lock:
            self._counter += 1
            key = str(self._counter)
        self._bodies[key] = sse
        return self.client.messages.stream(
            model=MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-test-body": key},
        )

    def final_message(self, events: Iterable[dict[str, Any]]) -> Any:
        with self.stream(encode_sse(events)) as stream:
            return stream.get_final_message()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_loopback: SdkLoopback | None = None


def sdk() -> SdkLoopback:
    global _loopback
    if _loopback is None:
        _loopback = SdkLoopback()
    return _loopback


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def check_grammar(events: list[dict[str, Any]]) -> None:
    """The SSE grammar of docs/protocol.md#event-sequence, as the SDK needs it."""
    assert events[0]["type"] == "message_start"
    open_index = None
    next_index = 0
    failed = events[-1]["type"] == "error"
    for event in events[1:-1] if failed else events[1:-2]:
        kind = event["type"]
        assert kind != "message_start"
        if kind == "content_block_start":
            assert open_index is None and event["index"] == next_index
            open_index = next_index
            next_index += 1
        elif kind == "content_block_delta":
            assert event["index"] == open_index
        elif kind == "content_block_stop":
            assert event["index"] == open_index
            open_index = None
    assert open_index is None
    if failed:
        return
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
    assert events[-2]["delta"]["stop_reason"] in {"end_turn", "tool_use", "max_tokens", "stop_sequence"}
    assert events[-2]["usage"]["output_tokens"] >= 1
