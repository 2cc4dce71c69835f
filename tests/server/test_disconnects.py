"""The disconnect helper on its own: work for a client that left is cancelled and cleaned up."""

from __future__ import annotations

import asyncio

from q2api.server.lifecycle.disconnects import unless_client_leaves


async def gone_client() -> dict:
    return {"type": "http.disconnect"}


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
