"""q2api.server.allocator: large blocks kept for reuse, given back once the worker stops receiving requests."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from q2api.server.allocator import TRIM_FROM_BYTES, GlibcAllocator, IdleGiveBack, returning_idle_memory

glibc_only = pytest.mark.skipif(GlibcAllocator.load() is None, reason="glibc's malloc calls are not available")


class FakeAllocator:
    def __init__(self, free: int = TRIM_FROM_BYTES) -> None:
        self.free = free
        self.kept = False
        self.given_back = 0

    def keep_freed_blocks(self) -> bool:
        self.kept = True
        return True

    def free_bytes(self) -> int:
        return self.free

    def give_back(self) -> None:
        self.given_back += 1


async def test_freed_memory_is_given_back_once_per_idle_stretch_never_while_requests_come() -> None:
    allocator = FakeAllocator()
    received = 0
    watcher = IdleGiveBack(allocator, lambda: received)  # type: ignore[arg-type]
    await watcher.check()  # idle since the start: nothing to give back yet
    for _ in range(5):  # a request in every period: never idle
        received += 1
        await watcher.check()
    assert allocator.given_back == 0
    for _ in range(3):  # idle: given back once, not again while nothing changes
        await watcher.check()
    assert allocator.given_back == 1
    received += 1  # requests again, then idle again: a second time
    await watcher.check()
    await watcher.check()
    assert allocator.given_back == 2


async def test_little_free_memory_is_not_worth_a_trim() -> None:
    allocator = FakeAllocator(free=TRIM_FROM_BYTES - 1)
    received = 1
    watcher = IdleGiveBack(allocator, lambda: received)  # type: ignore[arg-type]
    received += 1
    for _ in range(3):
        await watcher.check()
    assert allocator.given_back == 0


async def test_the_watcher_keeps_freed_blocks_and_checks_every_period() -> None:
    allocator = FakeAllocator()
    received = 0
    async with returning_idle_memory(lambda: received, allocator, period=0.01):  # type: ignore[arg-type]
        assert allocator.kept
        received += 1
        for _ in range(500):  # idle after that one request: given back within a few periods
            if allocator.given_back:
                break
            await asyncio.sleep(0.01)
    assert allocator.given_back == 1


@glibc_only
def test_freed_large_blocks_stay_resident_until_given_back() -> None:
    """In a fresh interpreter: 64 buffers of 1 MB freed stay in the heap (the next request reuses them, no page
    faults); giving back returns them to the system."""
    script = textwrap.dedent(
        """
        from q2api.server.allocator import GlibcAllocator

        def rss_mb():
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

        allocator = GlibcAllocator.load()
        assert allocator.keep_freed_blocks()
        start = rss_mb()
        blocks = [b"x" * (1 << 20) for _ in range(64)]  # written: pages really used
        del blocks
        kept = rss_mb() - start
        allocator.give_back()
        print(kept, rss_mb() - start)
        """
    )
    answer = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    kept, after = map(float, answer.stdout.split())
    assert kept > 48 and after < 16
