"""Noticing a client that went away before its reply started, so the work for it is cancelled at once.

(Once a reply streams, `q2api.server.lifecycle.streaming.ReplyStream` listens itself.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.types import Receive

T = TypeVar("T")


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
