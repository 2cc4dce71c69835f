"""The disconnect helpers on their own: clean-up runs however early the client leaves."""

from __future__ import annotations

import asyncio

from q2api.server.disconnects import DisconnectAwareStreamingResponse, unless_client_leaves

HTTP_SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "method": "POST", "headers": []}


async def gone_client() -> dict:
    return {"type": "http.disconnect"}


async def test_on_finish_runs_even_when_the_body_never_started():
    body_started = False

    async def body():
        nonlocal body_started
        body_started = True
        yield b"event: ping\n\n"

    async def slow_socket(message: dict) -> None:
        await asyncio.sleep(5)  # the client's socket never accepts the response start

    finished: list[bool] = []
    response = DisconnectAwareStreamingResponse(body(), on_finish=lambda: finished.append(True))
    await asyncio.wait_for(response(HTTP_SCOPE, gone_client, slow_socket), timeout=2)
    assert finished == [True]
    assert not body_started  # so the body's own `finally` could not have cleaned up


async def test_work_is_cancelled_when_the_client_leaves():
    cleaned_up = asyncio.Event()

    async def long_upstream_call() -> str:
        try:
            await asyncio.sleep(5)
            return "reply"
        finally:
            cleaned_up.set()

    assert await asyncio.wait_for(unless_client_leaves(gone_client, long_upstream_call()), timeout=2) is None
    assert cleaned_up.is_set()


async def test_work_that_finishes_first_returns_its_result():
    async def connected_client() -> dict:
        await asyncio.sleep(5)
        return {"type": "http.disconnect"}

    async def quick() -> str:
        return "reply"

    assert await unless_client_leaves(connected_client, quick()) == "reply"
