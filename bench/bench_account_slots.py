"""What holding an account's in-flight cap across the fleet costs a request: one slot taken (the round
trip to the fleet's ledger, which also brings the account's host rests) and given back (a second one,
sent without the request waiting), on each place the ledger can live — the SQLite store, PostgreSQL,
MariaDB, Redis — beside the per-process count alone (what a gateway did before the fleet).

    .venv/bin/python bench/bench_account_slots.py [--requests 1000] [--concurrency 1,16]

Printed per place and concurrency: slots per second, the p50 / p95 latency a request waits for its slot
(what it adds before the upstream call), and the CPU this process spent per slot taken and given back
(the SQLite store's worker thread included: it runs in this process). The cap is set high enough that
no take is refused. Servers that do not answer are skipped, named. Nothing here is asserted: it is a
figure to read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from q2api.amazonq.inflight import InflightSlots
from q2api.fleet.limits import FleetLimits
from q2api.fleet.redis_ledger import RedisLedger
from q2api.fleet.store_ledger import StoreLedger
from q2api.fleet.tables import FLEET_MIGRATIONS, metadata
from q2api.store.opening import open_database

CAP = 10**6
ACCOUNTS = 4
REDIS_URL = os.environ.get("Q2API_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


async def run(
    slots: InflightSlots, fleet: FleetLimits | None, requests: int, concurrency: int
) -> tuple[float, list[float], float]:
    """(slots a second, each take's latency, CPU seconds per slot taken and given back)."""
    latencies: list[float] = []
    queue = iter(range(requests))

    async def worker() -> None:
        for n in queue:
            account = f"acct-{n % ACCOUNTS}"
            started = time.perf_counter()
            taken = await slots.acquire(account)
            latencies.append(time.perf_counter() - started)
            assert taken
            slots.release(account)

    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if fleet is not None:
        await fleet.settled()  # the give-backs sent in the background are part of the cost
    elapsed = time.perf_counter() - started
    return requests / elapsed, latencies, (time.process_time() - cpu) / requests


def report(name: str, level: int, rate: float, latencies: list[float], cpu: float) -> None:
    latencies.sort()
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(
        f"{name:<14} {level:>11} {rate:>9.0f} {statistics.median(latencies) * 1e3:>8.3f} {p95 * 1e3:>8.3f} "
        f"{cpu * 1e6:>12.0f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    print(f"{'slots in':<14} {'concurrency':>11} {'slots/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'CPU µs/slot':>12}")
    for level in levels:
        rate, latencies, cpu = await run(InflightSlots(CAP), None, args.requests, level)
        report("process only", level, rate, latencies, cpu)
    with tempfile.TemporaryDirectory() as directory:
        places: list[tuple[str, str | None, str | None]] = [
            ("sqlite", None, None),
            ("postgresql", "postgresql://postgres@127.0.0.1:5432/test", None),
            ("mariadb", "mysql://root@127.0.0.1:3306/test", None),
            ("redis", None, REDIS_URL),
        ]
        for name, url, redis_url in places:
            try:
                database = await open_database(url, Path(directory), (FLEET_MIGRATIONS,))
            except Exception as exc:
                print(f"{name:<14} skipped: {type(exc).__name__}")
                continue
            prefix = f"q2api-bench-{os.getpid()}"
            fleet = FleetLimits(RedisLedger(redis_url, prefix) if redis_url else StoreLedger(database))
            try:
                for level in levels:
                    rate, latencies, cpu = await run(InflightSlots(CAP, fleet), fleet, args.requests, level)
                    report(name, level, rate, latencies, cpu)
                    if fleet.outage.ongoing:
                        print(f"{name:<14} (the ledger failed during the run: these figures are the fallback's)")
            except Exception as exc:
                print(f"{name:<14} skipped: {type(exc).__name__}: {exc}")
            finally:
                await fleet.close()
                if redis_url is not None:
                    await _delete_redis_keys(redis_url, prefix)
                if url is not None:  # the servers' `test` databases are shared: leave them as found
                    await database.write(_drop_fleet_tables)
                await database.close()


async def _delete_redis_keys(url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def _drop_fleet_tables(connection: sa.Connection) -> None:
    metadata.drop_all(connection)
    FLEET_MIGRATIONS.bookkeeping.drop(connection, checkfirst=True)


if __name__ == "__main__":
    asyncio.run(main())
