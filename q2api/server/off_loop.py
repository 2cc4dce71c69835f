"""Pure work that may take long, run in a worker thread so the event loop keeps serving every other stream."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


async def run_off_loop(work: Callable[..., _T], *args: Any) -> _T:
    """`work(*args)` in a worker thread, in a copy of the caller's context (the request id of the lines
    it logs). The GIL is handed back every few milliseconds, so the loop's other streams go on meanwhile."""
    context = contextvars.copy_context()
    return await asyncio.to_thread(context.run, work, *args)
