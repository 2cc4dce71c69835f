"""The usage ledger: one row per request, written off the request path in batches.

A request only appends its row to a buffer (`UsageLedger.record`, no I/O); a background task writes
the buffer every second (or sooner once it holds a batch), and `close` writes what is left at
shutdown. A write that fails never fails a request: its rows are kept for the next attempt while the
buffer has room, and the rows given up are counted (`on_lost`, the `/metrics` counter).

Rows older than the retention are folded into daily sums (q2api_usage_daily) once an hour: the
replicas take turns on a row of q2api_tenant_meta, so two of them never fold the same rows twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from loguru import logger

from q2api.tenants.database import TenantDatabase
from q2api.tenants.tables import ROLLUP_TURN, tenant_meta, usage, usage_daily

FLUSH_SECONDS = 1.0
BATCH_ROWS = 500
MAX_BUFFERED_ROWS = 50_000  # beyond this (a store down for long under load) the oldest rows are given up
ROLLUP_EVERY_SECONDS = 3600.0


@dataclasses.dataclass(frozen=True, slots=True)
class UsageRow:
    at: float
    request_id: str
    key_label: str | None
    account: str
    model: str
    door: str
    status: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    credits: float
    credits_estimated: bool
    ttft_ms: float | None
    duration_ms: float

    def values(self) -> dict[str, Any]:
        moment = datetime.datetime.fromtimestamp(self.at, tz=datetime.UTC)
        return {**dataclasses.asdict(self), "day": moment.strftime("%Y-%m-%d"), "hour": int(self.at // 3600)}


class UsageLedger:
    def __init__(
        self,
        database: TenantDatabase,
        *,
        retention_days: int,
        on_lost: Callable[[int], None] = lambda count: None,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self.database = database
        self._retention_days = retention_days
        self._on_lost = on_lost
        self._flush_seconds = flush_seconds
        self._buffer: list[UsageRow] = []
        # One flush at a time: the writer's and an admin page's would take the same rows and drop later ones.
        self._flushing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_rollup = 0.0
        self.written = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="usage ledger")

    def record(self, row: UsageRow) -> None:
        """Keep one request's row for the next write (never blocks, never raises)."""
        self._buffer.append(row)
        if len(self._buffer) > MAX_BUFFERED_ROWS:
            dropped = len(self._buffer) - MAX_BUFFERED_ROWS
            del self._buffer[:dropped]
            self._on_lost(dropped)
        if len(self._buffer) >= BATCH_ROWS:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._flush_seconds)
            self._wake.clear()
            await self.flush()
            if time.time() - self._last_rollup >= ROLLUP_EVERY_SECONDS:
                self._last_rollup = time.time()
                try:
                    await roll_up(self.database, self._retention_days)
                except Exception as exc:
                    logger.warning(f"the usage ledger's daily roll-up failed ({type(exc).__name__}: {exc})")

    async def flush(self) -> bool:
        """Write the buffered rows; False (rows kept for the next attempt) when the store failed."""
        async with self._flushing:
            return await self._flush()

    async def _flush(self) -> bool:
        while self._buffer:
            batch = self._buffer[:BATCH_ROWS]

            def insert(db: sa.Connection, rows: list[UsageRow] = batch) -> None:
                db.execute(sa.insert(usage), [row.values() for row in rows])

            try:
                await self.database.write(insert)
            except Exception as exc:
                logger.warning(f"{len(batch)} usage row(s) not written yet ({type(exc).__name__}: {exc})")
                return False
            del self._buffer[: len(batch)]
            self.written += len(batch)
        return True

    async def close(self) -> None:
        """Stop the writer and write what is left (shutdown): rows that still fail are counted as lost."""
        if self._task is not None:
            async with self._flushing:  # never in the middle of a batch: its shielded write would commit, and
                self._task.cancel()  # the batch, still buffered, be written again below
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not await self.flush():
            self._on_lost(len(self._buffer))
            self._buffer.clear()


async def roll_up(database: TenantDatabase, retention_days: int, now: float | None = None) -> int:
    """Fold the rows past their retention into daily sums and delete them; how many rows were folded."""
    cutoff_day = datetime.datetime.fromtimestamp(
        (time.time() if now is None else now) - retention_days * 86400, tz=datetime.UTC
    ).strftime("%Y-%m-%d")

    def fold(db: sa.Connection) -> int:
        # Take the turn first: another replica folding the same days waits, then finds them gone.
        db.execute(sa.update(tenant_meta).where(tenant_meta.c.name == ROLLUP_TURN).values(value=time.time()))
        old = usage.c.day < cutoff_day
        groups = (usage.c.day, usage.c.key_label, usage.c.account, usage.c.model, usage.c.door)
        sums = db.execute(
            sa.select(
                *groups,
                sa.func.count().label("requests"),
                sa.func.sum(sa.case((usage.c.status >= 400, 1), else_=0)).label("errors"),
                sa.func.sum(usage.c.input_tokens).label("input_tokens"),
                sa.func.sum(usage.c.output_tokens).label("output_tokens"),
                sa.func.sum(usage.c.cache_read_tokens).label("cache_read_tokens"),
                sa.func.sum(usage.c.cache_write_tokens).label("cache_write_tokens"),
                sa.func.sum(usage.c.credits).label("credits"),
                sa.func.sum(sa.case((usage.c.credits_estimated, 1), else_=0)).label("estimated_requests"),
            )
            .where(old)
            .group_by(*groups)
        ).all()
        if not sums:
            return 0
        db.execute(sa.insert(usage_daily), [dict(row._mapping) for row in sums])
        return int(db.execute(sa.delete(usage).where(old)).rowcount)

    return await database.write(fold)
