"""What a time limit on each upstream read costs: asyncio.timeout(), a timer re-armed per read, WaitDeadline.

    .venv/bin/python bench/bench_wait_timers.py [--waits 200000]

A streamed reply waits for upstream bytes once per chunk. Each row is the extra
time per wait, on uvloop, over the same wait without a limit (an await that
completes at once, so only the limit's own cost is left):

  asyncio.timeout()      a Timeout object and a loop timer armed and cancelled per wait
  call_later per read    what aiohttp's sock_read does on every read (cancel + re-arm)
  WaitDeadline           q2api.amazonq.wait_deadline: one timer per stream, re-armed lazily
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from q2api.amazonq.wait_deadline import WaitDeadline


async def ready() -> int:
    return 1


async def per_wait(waits: int, wait: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    for _ in range(waits):
        await wait()
    return (time.perf_counter() - started) / waits


async def main(waits: int) -> None:
    loop = asyncio.get_running_loop()

    async def with_timeout() -> int:
        async with asyncio.timeout(10):
            return await ready()

    handle: list[asyncio.TimerHandle] = []

    async def with_rearmed_timer() -> int:
        if handle:
            handle.pop().cancel()
        handle.append(loop.call_later(300, lambda: None))
        return await ready()

    deadline = WaitDeadline()

    async def with_wait_deadline() -> int:
        deadline.begin(loop.time() + 10)
        try:
            return await ready()
        finally:
            deadline.end()

    base = await per_wait(waits, ready)
    for name, wait in (
        ("asyncio.timeout()", with_timeout),
        ("call_later per read", with_rearmed_timer),
        ("WaitDeadline", with_wait_deadline),
    ):
        extra = await per_wait(waits, wait) - base
        print(f"{name:<22} {extra * 1e6:6.2f} µs per wait")
    deadline.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waits", type=int, default=200_000)
    uvloop.run(main(parser.parse_args().waits))
