"""The SQLite account store: per-call latency and a worker's RSS, for each way of running SQLite.

    python bench/bench_store.py [--calls 1000] [--before DIR]

Each variant runs in a fresh process that imports the gateway (as a worker does), opens the store
in a temporary data directory, adds three accounts and times `calls` sequential awaits of each of
the store's hot calls (`generation` is the reloader's tick, `get`/`accounts` the pool's reads,
`save_tokens` a refresh's write). Variants:

* `thread`: the store as shipped: SQLAlchemy's plain engine, each unit of work on a worker thread;
* `aiosqlite`: the same store over SQLAlchemy's asyncio extension with aiosqlite (its default pool,
  one connection thread each); needs `pip install aiosqlite`, which q2api does not depend on;
* `before`: the hand-written sqlite3 store of the two-schema releases, from `--before DIR` (a
  checkout of an earlier commit, e.g. `git archive <commit> | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CALLS = ("generation", "get", "accounts", "save_tokens")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def time_calls(store: Any, calls: int) -> dict[str, list[float]]:
    first = await store.add(auth_method="social", refresh_token="r1", label="one")
    for label in ("two", "three"):
        await store.add(auth_method="social", refresh_token=f"r-{label}", label=label)
    work: dict[str, Callable[[], Awaitable[object]]] = {
        "generation": store.generation,
        "get": lambda: store.get(first.id),
        "accounts": store.accounts,
        "save_tokens": lambda: store.save_tokens(first.id, access_token="a", expires_at=2e9),
    }
    timings: dict[str, list[float]] = {}
    for name in CALLS:
        for _ in range(20):  # warm up
            await work[name]()
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            await work[name]()
            samples.append((time.perf_counter() - started) * 1e6)
        timings[name] = samples
    return timings


def open_aiosqlite_store(data_dir: Path) -> Any:
    """The shipped store's code over the asyncio extension and aiosqlite instead of a worker thread."""
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    from q2api.accounts.store import PlainSecrets, SqlAccountStore, SqliteAccountStore
    from q2api.store import sqlite_database
    from q2api.store.database import StoreDatabase

    SqliteAccountStore(data_dir)  # creates and migrates the file

    class AiosqliteDatabase(StoreDatabase):
        kind = "sqlite"

        def __init__(self, path: Path) -> None:
            super().__init__(f"the SQLite store {path}")
            self.engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 10.0})
            sa.event.listen(self.engine.sync_engine, "connect", sqlite_database._driver_autocommit)
            sa.event.listen(self.engine.sync_engine, "begin", sqlite_database._begin)

        async def _run(self, work: Any, *, write: bool, durable: bool = True) -> Any:
            with self.failures():
                async with self.engine.connect() as connection:
                    if write:
                        await connection.execution_options(q2api_write=True)
                    async with connection.begin():
                        return await connection.run_sync(work)

        async def _close(self) -> None:
            await self.engine.dispose()

    path = data_dir / "q2api.sqlite3"
    return SqlAccountStore(AiosqliteDatabase(path), PlainSecrets(), lambda _: None, str(path))  # type: ignore[arg-type,return-value]


async def child(variant: str, calls: int) -> dict[str, Any]:
    import q2api.server.app
    import q2api.server.gateway  # noqa: F401

    imported = rss_mb()
    with tempfile.TemporaryDirectory() as data_dir:
        if variant == "aiosqlite":
            store = open_aiosqlite_store(Path(data_dir))
        else:
            from q2api.accounts.store import SqliteAccountStore

            store = SqliteAccountStore(data_dir)
        timings = await time_calls(store, calls)
        await store.close()
    return {
        "variant": variant,
        "rss_imported": imported,
        "rss_after": rss_mb(),
        "sqlalchemy": "sqlalchemy" in sys.modules,
        "asyncio_extension": "sqlalchemy.ext.asyncio" in sys.modules,
        "timings": {name: (statistics.median(s), statistics.quantiles(s, n=10)[-1]) for name, s in timings.items()},
    }


def run_variant(variant: str, tree: Path, calls: int) -> dict[str, Any]:
    code = (
        f"import sys, json, asyncio; sys.path.insert(0, {str(tree)!r}); sys.path.insert(0, {str(ROOT / 'bench')!r});"
        f"import bench_store; print(json.dumps(asyncio.run(bench_store.child({variant!r}, {calls}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="timed calls of each kind per variant")
    parser.add_argument("--before", type=Path, help="a checkout of the two-schema releases, for the `before` variant")
    args = parser.parse_args()
    variants: list[tuple[str, Path]] = [("thread", ROOT), ("aiosqlite", ROOT)]
    if args.before:
        variants.insert(0, ("before", args.before.resolve()))
    header = f"{'variant':<10} {'RSS imported':>12} {'RSS after':>10}  " + "  ".join(f"{c + ' µs':>20}" for c in CALLS)
    print(header)
    print(f"{'':<33}  " + "  ".join(f"{'median / p90':>20}" for _ in CALLS))
    for variant, tree in variants:
        try:
            result = run_variant(variant, tree, args.calls)
        except SystemExit as failed:
            print(f"{variant:<10} skipped: {str(failed).splitlines()[-1]}")
            continue
        cells = "  ".join(f"{median:>9.0f} / {p90:>8.0f}" for median, p90 in result["timings"].values())
        print(f"{variant:<10} {result['rss_imported']:>9.1f} MB {result['rss_after']:>7.1f} MB  {cells}")


if __name__ == "__main__":
    main()
