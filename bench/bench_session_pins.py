"""Session affinity's pin lookup, which every turn of a multi-account gateway pays: per-call latency.

    python bench/bench_session_pins.py [--calls 2000] [--redis URL]

Times `calls` sequential `find` calls of a pinned conversation (a turn's one round trip) and `keep`
calls that change the pin (a conversation that starts or moves: a write), for the pins in the
SQLite store, in Redis (a key prefix of its own, deleted after) and in PostgreSQL (a scratch schema of
the test server, `Q2API_TEST_POSTGRES_URL`, dropped after); each skipped, said so, when its server does
not answer.
Figures: docs/benchmarks.md, session affinity.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the scratch schema of the test PostgreSQL server

from q2api.accounts.session_pins import SESSION_PIN_MIGRATIONS, Pin, SessionPins, StoreSessionPins
from q2api.store.opening import opened_database
from tests.support.databases import scratch_database_url


async def timed(calls: int, call: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    """Median and 95th percentile of `calls` sequential awaits, in microseconds."""
    seconds = []
    for n in range(calls):
        started = time.perf_counter()
        await call(n)
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    return statistics.median(seconds) * 1e6, seconds[int(len(seconds) * 0.95)] * 1e6


async def measure(name: str, pins: SessionPins, calls: int) -> None:
    key = uuid.uuid4().hex
    await pins.keep(key, Pin("account-a"), None)
    find = await timed(calls, lambda n: pins.find(key))
    keep = await timed(calls, lambda n: pins.keep(key, Pin(f"account-{n % 2}"), Pin(f"account-{(n + 1) % 2}")))
    print(
        f"{name:<12} find median {find[0]:7.0f} µs  p95 {find[1]:7.0f} µs   keep (a move) median {keep[0]:7.0f} µs  p95 {keep[1]:7.0f} µs"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        async with opened_database(None, data_dir, (SESSION_PIN_MIGRATIONS,)) as database:
            await measure("sqlite", StoreSessionPins(database, 3600), args.calls)
    try:
        from q2api.accounts.redis_session_pins import RedisSessionPins

        prefix = f"q2api-bench-{uuid.uuid4().hex[:8]}"
        redis_pins = RedisSessionPins(args.redis, 3600, prefix=prefix)
        try:
            await measure("redis", redis_pins, args.calls)
        finally:
            await redis_pins._redis.delete(*[key async for key in redis_pins._redis.scan_iter(f"{prefix}:*")])
            await redis_pins.close()
    except Exception as exc:  # no server: said, not hidden
        print(f"redis        skipped ({type(exc).__name__}: {exc})")
    try:
        with scratch_database_url("postgresql") as url:
            async with opened_database(url, ".", (SESSION_PIN_MIGRATIONS,)) as database:
                await measure("postgresql", StoreSessionPins(database, 3600), args.calls)
    except (Exception, pytest.skip.Exception) as exc:
        print(f"postgresql   skipped ({type(exc).__name__}: {exc})")


if __name__ == "__main__":
    asyncio.run(main())
