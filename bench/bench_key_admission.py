"""What holding a store key to its limits costs a request: one admission (check and count, atomically)
and its settling, on each place the counters can live — the SQLite store, PostgreSQL, MariaDB, Redis.

    .venv/bin/python bench/bench_key_admission.py [--requests 500] [--concurrency 1,16]

A key with an rpm, a tpm, a daily budget and a concurrency limit (the most work an admission does);
each request is admitted, then settled with its tokens and credits, as the gateway does. Printed per
store and concurrency: admissions per second and the p50 / p95 latency of one admission. Servers that
do not answer are skipped, named. Nothing here is asserted: it is a figure to read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from q2api.store.database import StoreDatabase
from q2api.tenants.counters import Counters, StoreCounters
from q2api.tenants.database import open_tenant_database
from q2api.tenants.gate import LimitGate
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.tenants.redis_counters import RedisCounters
from q2api.tenants.tables import TENANT_MIGRATIONS, metadata

LIMITS = KeyLimits(rpm=10**9, tpm=10**9, max_concurrent=10**6, credits_per_day=10**9)


async def run(gate: LimitGate, database: StoreDatabase, requests: int, concurrency: int) -> tuple[float, list[float]]:
    _key, record = await KeyStore(database).create(f"bench-{time.monotonic_ns()}", LIMITS)
    latencies: list[float] = []
    queue = iter(range(requests))

    async def worker() -> None:
        for _ in queue:
            started = time.perf_counter()
            admission = await gate.admit(record, "model", 1000)
            latencies.append(time.perf_counter() - started)
            await gate.settle(admission, 1200, 0.05)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return requests / (time.perf_counter() - started), latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    print(f"{'counters in':<14} {'concurrency':>11} {'admissions/s':>13} {'p50 ms':>8} {'p95 ms':>8}")
    with tempfile.TemporaryDirectory() as directory:
        places: list[tuple[str, str | None, str | None]] = [
            ("sqlite", None, None),
            ("postgresql", "postgresql://postgres@127.0.0.1:5432/test", None),
            ("mariadb", "mysql://root@127.0.0.1:3306/test", None),
            ("redis", None, "redis://127.0.0.1:6379/14"),
        ]
        for name, url, redis_url in places:
            try:
                database = await open_tenant_database(url, Path(directory))
            except Exception as exc:
                print(f"{name:<14} skipped: {type(exc).__name__}")
                continue
            counters: Counters = RedisCounters(redis_url) if redis_url else StoreCounters(database)
            try:
                for level in levels:
                    rate, latencies = await run(LimitGate(counters), database, args.requests, level)
                    latencies.sort()
                    p95 = latencies[int(0.95 * (len(latencies) - 1))]
                    print(
                        f"{name:<14} {level:>11} {rate:>13.0f} {statistics.median(latencies) * 1000:>8.2f} {p95 * 1000:>8.2f}"
                    )
            except Exception as exc:
                print(f"{name:<14} skipped: {type(exc).__name__}: {exc}")
            finally:
                await counters.close()
                if url is not None:  # the servers' `test` databases are shared: leave them as found
                    await database.write(_drop_tenant_tables)
                await database.close()


def _drop_tenant_tables(connection: sa.Connection) -> None:
    # The chain's bookkeeping too: left behind, it told the next run the tables were there.
    metadata.drop_all(connection)
    TENANT_MIGRATIONS.bookkeeping.drop(connection, checkfirst=True)


if __name__ == "__main__":
    asyncio.run(main())
