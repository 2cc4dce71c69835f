"""The C allocator under large request bodies: freed memory reused while requests come, given back once they stop.

A Claude Code turn is a 1-2 MB body, and the gateway makes several buffers of its size per request
(the body read, its upstream encoding, the socket write's copy). glibc's malloc serves blocks that
large with a fresh `mmap` and unmaps them when freed, so every request faults in several megabytes
of new zeroed pages (~950 page faults per 1 MB request, ~15 % of its CPU: BENCHMARKS.md, "Claude
Code's real request sizes"). Raising the mmap threshold keeps those blocks in malloc's heaps, where
the next request reuses them without a fault.

The price is that freed memory stays in the heaps: after a burst of large requests the worker's RSS
would stay at the burst's peak. So a watcher gives it back once the worker has received no request
for a whole period: first Python's garbage collection (the requests that ended left reference
cycles, and an idle worker allocates nothing that would start a collection: their objects would
pin Python's arenas), then `malloc_trim`. Memory follows what is in flight, not what once was.

Only glibc has these calls; elsewhere (musl, macOS) nothing changes and nothing is watched.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
from collections.abc import AsyncIterator, Awaitable, Callable

from loguru import logger

# mallopt(3) parameters.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from malloc's heaps (glibc's largest mmap threshold on 64-bit); a
# larger body is rare enough to keep its own mapping.
MMAP_THRESHOLD = 32 << 20
# The heap's free top is kept up to this size between trims (glibc's default gives back anything over
# 128 KB at every free, which would undo the threshold).
TRIM_THRESHOLD = 256 << 20
# How long the worker must have received no request before freed memory is given back, and how much
# must be free for it to be worth a trim.
IDLE_PERIOD = 10.0
TRIM_FROM_BYTES = 8 << 20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


class GlibcAllocator:
    """glibc's malloc, through ctypes (its calls release the GIL)."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._libc = libc
        self._libc.mallinfo2.restype = _MallInfo2

    @classmethod
    def load(cls) -> GlibcAllocator | None:
        """The process's glibc, or None under another C library."""
        name = ctypes.util.find_library("c")
        if name is None:
            return None
        try:
            libc = ctypes.CDLL(name)
            libc.mallopt, libc.malloc_trim, libc.mallinfo2  # noqa: B018 - glibc >= 2.33 has all three
        except (OSError, AttributeError):
            return None
        return cls(libc)

    def keep_freed_blocks(self) -> bool:
        """Large blocks from the heaps, and the heaps kept when freed (until `give_back`)."""
        return bool(self._libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
            self._libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        )

    def free_bytes(self) -> int:
        """Bytes the heaps hold free (all arenas)."""
        return int(self._libc.mallinfo2().fordblks)

    def give_back(self) -> None:
        """Return the heaps' free pages to the system."""
        self._libc.malloc_trim(0)


class IdleGiveBack:
    """Gives freed memory back once per stretch in which no request came: `check` once a period."""

    def __init__(self, allocator: GlibcAllocator, requests_received: Callable[[], int]) -> None:
        self._allocator = allocator
        self._requests_received = requests_received
        self._seen = requests_received()
        self._given_back = True  # nothing to give back before the first request

    async def check(self) -> None:
        now = self._requests_received()
        if now != self._seen:
            self._seen, self._given_back = now, False
            return
        if self._given_back or self._allocator.free_bytes() < TRIM_FROM_BYTES:
            return
        self._given_back = True  # once per idle stretch: the bytes stay counted free after a trim
        try:
            gc.collect()
            # A trim walks every heap: in a thread, since its ctypes call lets the loop go on.
            await asyncio.to_thread(self._allocator.give_back)
        except Exception as exc:  # never worth a worker
            logger.opt(exception=exc).warning(f"giving freed memory back failed: {exc}")


@contextlib.asynccontextmanager
async def returning_idle_memory(
    requests_received: Callable[[], int], allocator: GlibcAllocator | None = None, period: float = IDLE_PERIOD
) -> AsyncIterator[None]:
    """Keep freed large blocks for reuse while the block runs, and give them back after each `period` in
    which `requests_received()` (a running count) did not move."""
    allocator = allocator or GlibcAllocator.load()
    if allocator is None or not allocator.keep_freed_blocks():
        yield
        return
    watcher = asyncio.create_task(_every(period, IdleGiveBack(allocator, requests_received).check))
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _every(period: float, check: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(period)
        await check()
