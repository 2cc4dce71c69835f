"""Noticing a client that went away, so its upstream request is cancelled (and its connection closed) at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

T = TypeVar("T")


class DisconnectAwareStreamingResponse(StreamingResponse):
    """Streams while listening for the client's disconnect, whatever ASGI version the server speaks.

    Starlette only listens for `http.disconnect` on ASGI < 2.4; on newer servers a
    gone client is noticed at the next write, which can be a ping interval
    later. Cancelling the body at once is what closes the upstream request
    promptly, so listen always. `on_finish` runs when the response ends in any
    way, even when the body never started (its own clean-up then never runs).
    """

    def __init__(self, content: AsyncIterator[bytes], *, on_finish: Callable[[], None], **options: Any) -> None:
        super().__init__(content, **options)
        self._on_finish = on_finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream_then_stop() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream_then_stop)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            self._on_finish()


async def unless_client_leaves(receive: Receive, work: Coroutine[Any, Any, T]) -> T | None:
    """`work`'s result, or None if the client disconnects first (then `work` is cancelled).

    Starlette does not cancel a handler whose client left, and the request body
    has been read, so the next ASGI message can only be `http.disconnect`.
    Servers repeat that message to later `receive()` calls, so a streaming
    response returned afterwards still hears it.
    """
    working = asyncio.ensure_future(work)
    watching = asyncio.ensure_future(_client_disconnect(receive))
    try:
        await asyncio.wait((working, watching), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        working.cancel()
        raise
    finally:
        watching.cancel()
    if working.done():
        return working.result()
    working.cancel()
    # Let its clean-up (closing the upstream reply) run, without swallowing a cancellation of our own.
    await asyncio.wait((working,))
    return None


async def _client_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
