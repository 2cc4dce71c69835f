"""Pure work that may take long, run in a worker thread so the event loop keeps serving every other stream."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

_T = TypeVar("_T")

# One thread for all of it, first come first served. The work is Python and holds the GIL, so a second
# thread would not finish it sooner; it would only run two large bodies' preparations at once: both
# parsed requests alive together (a higher peak), their objects interleaved in the same arenas of
# Python's allocator (which then cannot give them back after a burst: BENCHMARKS.md, "Claude Code's
# real request sizes"), and one more thread contending with the loop for the GIL.
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="q2api-off-loop")


async def run_off_loop(work: Callable[..., _T], *args: Any) -> _T:
    """`work(*args)` in the worker thread, in a copy of the caller's context (the request id of the lines
    it logs). The GIL is handed back every few milliseconds, so the loop's other streams go on meanwhile."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_WORKER, context.run, work, *args)
