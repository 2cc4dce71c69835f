"""ReplyPump's two ways to get body bytes: those already buffered (no wait, no timer) and a waited read."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.translation.pump import ReplyPump
from tests.support.pipeline import coalesced, make_translator, run_pipeline, split_at, text_event, tool_event

REPLY = b"".join(
    [
        text_event("Let me look. "),
        text_event("Reading the file now."),
        tool_event("tool_1", "Read", '{"file_path": "/tmp/a.py"}', stop=True),
    ]
)


class Body:
    """Body pieces in order; the ones marked buffered are there before anyone waits for them."""

    def __init__(self, pieces: list[tuple[bytes, bool]]) -> None:
        self._pieces = deque(pieces)
        self.waited = 0

    def buffered(self) -> bytes | None:
        if self._pieces and self._pieces[0][1]:
            return self._pieces.popleft()[0]
        return None

    def __aiter__(self) -> Body:
        return self

    async def __anext__(self) -> bytes:
        self.waited += 1
        await asyncio.sleep(0)  # the bytes arrive later
        if not self._pieces:
            raise StopAsyncIteration
        return self._pieces.popleft()[0]


def pump_all(body: Body) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        translator = make_translator()
        pump = ReplyPump(body, translator, body.buffered)
        events = translator.start()
        while not pump.finished:
            events += await pump.read(timeout=5) or ()
        return events

    return asyncio.run(run())


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(1, len(REPLY) - 1), max_size=12), buffered=st.lists(st.booleans(), max_size=13))
def test_buffered_and_waited_bytes_give_the_same_reply(cuts: list[int], buffered: list[bool]) -> None:
    pieces = split_at(REPLY, cuts)
    flags = [*buffered, *[False] * len(pieces)][: len(pieces)]
    events = pump_all(Body(list(zip(pieces, flags, strict=True))))
    assert coalesced(events) == coalesced(run_pipeline(REPLY))


def test_bytes_already_buffered_are_read_without_waiting() -> None:
    body = Body([(text_event("a"), True), (text_event("b"), True), (text_event("c"), False)])
    events = pump_all(body)
    texts = [event["delta"]["text"] for event in events if event["type"] == "content_block_delta"]
    assert "".join(texts) == "abc"
    assert body.waited == 2  # "c", then the end of the body


def test_every_read_lets_the_loop_run_even_when_bytes_are_always_buffered() -> None:
    # The stream's disconnect watcher only runs if the reading task yields; a fast upstream
    # always has bytes buffered, so the pump must yield on that path too.
    async def run() -> tuple[int, int]:
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count_turns())
        await asyncio.sleep(0)
        body = Body([(text_event("x"), True)] * 50)
        pump = ReplyPump(body, make_translator(), body.buffered)
        for _ in range(50):
            await pump.read(timeout=5)
        counter.cancel()
        return turns, body.waited

    turns, waited = asyncio.run(run())
    assert waited == 0
    assert turns >= 50


def test_a_fault_of_our_own_on_buffered_bytes_ends_with_one_error_event(monkeypatch) -> None:
    translator = make_translator()

    def broken_feed_all(frames: object) -> list[dict[str, Any]]:
        raise RuntimeError("translator bug")

    monkeypatch.setattr(translator, "feed_all", broken_feed_all)

    async def run() -> tuple[ReplyPump, list[dict[str, Any]] | None]:
        body = Body([(text_event("Hello"), True)])
        pump = ReplyPump(body, translator, body.buffered)
        return pump, await pump.read(timeout=5)

    pump, events = asyncio.run(run())
    assert events is not None and [event["type"] for event in events] == ["error"]
    assert pump.finished and pump.failure is not None and pump.failure.status == 500
