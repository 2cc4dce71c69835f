"""The usage ledger: one row per request, written off the request path in batches, never dropped silently.

A request appends its row to the journal (ledger_journal.py: one `write` to a file of the data
directory) and to a list in memory (`UsageLedger.record`, never blocking, never raising); a background
task writes the rows to the database every second (or sooner once a batch is there), and `close`
writes what is left at shutdown. What a crash can lose: nothing when the process dies (kill -9, an
out-of-memory kill: the journal is in the kernel's hands), the rows of the last second when the
machine does (each second's segment is fsynced); rows that are only in memory (no journal: a
read-only data directory) are lost with the process.

A write that fails never fails a request. While the store is down, rows wait: in memory up to
MAX_BUFFERED_ROWS, past it in the journal alone, MAX_WAITING_ROWS at most; they are written when
the store answers again (by this process, or at the next start by any process of the data directory,
which adopts the journal of one that ended). A row the database refuses on its own (a value it cannot
hold) is written alone, so that it never holds the others back; every row given up is counted
(`on_lost`, `q2api_usage_rows_lost_total`) and logged, and `on_waiting` says how many wait
(`q2api_usage_rows_waiting`). Text longer than its column (a model id of 300 characters) is cut to it.

Rows older than the retention are folded into daily sums once an hour (rollup.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from loguru import logger

from q2api.store.database import StoreDatabase
from q2api.store.errors import StoreUnavailable
from q2api.tenants.ledger_journal import LedgerJournal, Segment
from q2api.tenants.outage import Outage
from q2api.tenants.rollup import roll_up
from q2api.tenants.tables import ROLLUP_TURN, tenant_meta, usage

FLUSH_SECONDS = 1.0
BATCH_ROWS = 500
MAX_BUFFERED_ROWS = 50_000  # rows waiting in memory; past it they wait in the journal alone
MAX_WAITING_ROWS = 2_000_000  # rows waiting at all (about 700 MB of journal); past it new rows are lost, counted
ADOPT_EVERY_SECONDS = 10.0  # how often the journal is searched for the segments of processes that ended
ROLLUP_EVERY_SECONDS = 3600.0
# What each column can hold: a value beyond it is cut to it rather than refused with its batch (text
# to its length, a 32-bit integer to its range, a float that is not finite to 0).
_TEXT_LENGTHS = {
    column.name: column.type.length
    for column in usage.columns
    if isinstance(column.type, sa.String) and column.type.length is not None
}
_INT32_COLUMNS = frozenset(
    column.name
    for column in usage.columns
    if isinstance(column.type, sa.Integer) and not isinstance(column.type, sa.BigInteger)
)
_INT32 = (-(2**31), 2**31 - 1)
Row = dict[str, Any]


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

    def values(self) -> Row:
        """The row as the table takes it: its day and hour added, text cut to its column."""
        moment = datetime.datetime.fromtimestamp(self.at, tz=datetime.UTC)
        values: Row = {**dataclasses.asdict(self), "day": moment.strftime("%Y-%m-%d"), "hour": int(self.at // 3600)}
        for name, length in _TEXT_LENGTHS.items():
            value = values.get(name)
            if isinstance(value, str) and len(value) > length:
                values[name] = value[:length]
        for name in _INT32_COLUMNS & values.keys():
            values[name] = min(max(int(values[name]), _INT32[0]), _INT32[1])
        for name in ("credits", "ttft_ms", "duration_ms"):
            value = values[name]
            if isinstance(value, float) and not math.isfinite(value):
                values[name] = None if name == "ttft_ms" else 0.0
        return values


class UsageLedger:
    def __init__(
        self,
        database: StoreDatabase,
        *,
        retention_days: int,
        journal: LedgerJournal | None = None,
        on_lost: Callable[[int], None] = lambda count: None,
        on_waiting: Callable[[int], None] = lambda count: None,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        """`journal`: where rows wait, crash-safe (None: in memory only, lost with the process)."""
        self.database = database
        self._retention_days = retention_days
        self._journal = journal
        self._on_lost = on_lost
        self._on_waiting = on_waiting
        self._flush_seconds = flush_seconds
        self._current: list[Row] = []  # rows since the last seal (the journal's current segment)
        self._pending: collections.deque[Segment] = collections.deque()  # sealed, oldest first
        self._waiting = 0  # rows not in the database yet, wherever they wait
        self._wake = asyncio.Event()
        # One flush at a time: the writer's and an admin page's would write the same segment twice.
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_rollup = 0.0
        self._last_adoption = 0.0
        self._outage = Outage(
            "the usage ledger's store",
            "usage rows wait (in memory, then in the journal) and are written once it answers",
        )
        self.written = 0
        self.lost = 0

    @property
    def waiting(self) -> int:
        """Rows not in the database yet (in memory, or in the journal alone)."""
        return self._waiting

    @property
    def in_memory(self) -> int:
        """Rows waiting in memory (at most about MAX_BUFFERED_ROWS; the others wait in the journal alone)."""
        return len(self._current) + sum(len(segment.rows) for segment in self._pending if segment.rows is not None)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="usage ledger")

    def record(self, row: UsageRow) -> None:
        """Keep one request's row for the next write (never blocks, never raises)."""
        if self._waiting >= MAX_WAITING_ROWS:
            self._lose(1, f"{MAX_WAITING_ROWS} rows already wait for the store")
            return
        values = row.values()
        if self._journal is not None:
            try:
                self._journal.append(values)
            except OSError as exc:
                logger.warning(
                    f"the usage ledger's journal cannot be written ({type(exc).__name__}: {exc}); rows wait in "
                    "memory alone from now on, and a crash would lose them"
                )
                self._seal_journal_only()  # what it holds is whole; later rows go in memory-only segments
                self._journal = None
        self._current.append(values)
        self._count_waiting(1)
        if len(self._current) >= BATCH_ROWS:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._flush_seconds)
            self._wake.clear()
            if self._journal is not None and time.monotonic() - self._last_adoption >= ADOPT_EVERY_SECONDS:
                self._last_adoption = time.monotonic()
                self._adopt()
            await self.flush()
            if time.time() - self._last_rollup >= ROLLUP_EVERY_SECONDS:
                self._last_rollup = time.time()
                try:
                    await roll_up(self.database, self._retention_days)
                except Exception as exc:
                    logger.warning(f"the usage ledger's daily roll-up failed ({type(exc).__name__}: {exc})")

    async def flush(self) -> bool:
        """Write every waiting row; False (they wait on) when the store failed."""
        async with self._flushing:
            await self._seal()
            while self._pending:
                segment = self._pending[0]
                try:
                    await self._write_segment(segment)
                except StoreUnavailable as exc:
                    self._outage.failed(exc, "kept waiting")
                    self._bound_memory()
                    return False
                self._pending.popleft()
                if segment.path is not None and self._journal is not None:
                    self._journal.discard(segment.path)
                    self._release_adopted(segment)
            self._outage.answered()
            return True

    async def close(self) -> None:
        """Stop the writer and write what is left (shutdown). Rows still waiting stay in the journal for
        the next start; rows in memory alone are lost, and counted."""
        if self._task is not None:
            async with self._flushing:  # never in the middle of a segment: its shielded write would commit,
                self._task.cancel()  # and the segment, still waiting, be written again below
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()
        in_memory_only = sum(segment.count for segment in self._pending if segment.path is None)
        if in_memory_only:
            self._lose(in_memory_only, "the store did not answer before the shutdown, and they had no journal")
        if self._journal is not None:
            if self._waiting - in_memory_only:
                logger.warning(
                    f"{self._waiting - in_memory_only} usage row(s) wait in {self._journal.directory} for the "
                    "store: the next start on this data directory writes them"
                )
            self._journal.close()
        self._pending.clear()

    # -- plumbing ---------------------------------------------------------------------

    async def _seal(self) -> None:
        """The rows since the last seal become a segment of their own, its journal file flushed to the disk."""
        if not self._current:
            return
        sealed = self._journal.seal() if self._journal is not None else None
        self._pending.append(Segment(sealed[0] if sealed else None, self._current, len(self._current)))
        self._current = []
        if sealed is not None:
            try:
                await asyncio.to_thread(LedgerJournal.finish_sealing, sealed[1])
            except OSError as exc:  # the rows are still in memory; their file may be short of them
                logger.warning(f"the usage ledger's journal could not be flushed ({type(exc).__name__}: {exc})")

    def _seal_journal_only(self) -> None:
        """The journal is failing: its current segment is sealed as is (its rows are in memory too)."""
        assert self._journal is not None
        sealed = self._journal.seal()
        if sealed is not None:
            with contextlib.suppress(OSError):
                LedgerJournal.finish_sealing(sealed[1])
        if self._current:
            self._pending.append(Segment(sealed[0] if sealed else None, self._current, len(self._current)))
            self._current = []

    async def _write_segment(self, segment: Segment) -> None:
        """Write `segment` (raises StoreUnavailable when the store is down: it waits on, whole or in part)."""
        if segment.rows is None:
            assert segment.path is not None
            try:
                segment.rows = await asyncio.to_thread(LedgerJournal.read, segment.path)
            except FileNotFoundError:
                segment.rows = []
            if segment.maybe_written:  # adopted: counted as waiting here once read
                self._set_count(segment, len(segment.rows))
        rows = segment.rows
        try:
            written = await self.database.write(_inserting(rows, segment.maybe_written))
        except StoreUnavailable:
            if not await self._store_answers():
                raise
            written = await self._write_one_by_one(segment)  # the store is fine: a row of the batch is not
        self.written += written
        self._set_count(segment, 0)

    async def _write_one_by_one(self, segment: Segment) -> int:
        """The database refused the segment while it answers: each row alone, the refused ones given up."""
        assert segment.rows is not None
        segment.maybe_written = True  # if the store fails half-way, the rows written so far are not written twice
        written = 0
        while segment.rows:
            row = segment.rows[0]
            try:
                written += await self.database.write(_inserting([row], True))
            except StoreUnavailable as exc:
                if not await self._store_answers():
                    raise
                self._lose(1, f"the database refused the row of request {row.get('request_id')} ({exc})")
            segment.rows.pop(0)
            self._set_count(segment, segment.count - 1)
        return written

    async def _store_answers(self) -> bool:
        """Whether the store takes a write now (a row it refused is then the row's fault, not the store's)."""
        try:
            await self.database.write(_touch_rollup_turn)
        except StoreUnavailable:
            return False
        return True

    def _bound_memory(self) -> None:
        """Past MAX_BUFFERED_ROWS in memory, the oldest segments wait in their journal file alone (or,
        without one, are given up)."""
        in_memory = sum(len(segment.rows) for segment in self._pending if segment.rows is not None)
        for segment in list(self._pending):
            if in_memory <= MAX_BUFFERED_ROWS:
                return
            # A segment that may be written in part stays whole in memory (at most the one being written).
            if segment.rows is None or segment.maybe_written:
                continue
            in_memory -= len(segment.rows)
            if segment.path is not None:
                segment.rows = None  # read back from the file when the store answers
            else:
                self._pending.remove(segment)
                self._lose(segment.count, f"more than {MAX_BUFFERED_ROWS} rows waited in memory, with no journal")
                self._set_count(segment, 0)

    def _adopt(self) -> None:
        assert self._journal is not None
        try:
            for segment in self._journal.orphans():
                self._pending.append(segment)
        except OSError as exc:
            logger.warning(f"the usage ledger's journal could not be searched ({type(exc).__name__}: {exc})")

    def _release_adopted(self, segment: Segment) -> None:
        """An adopted owner whose segments are all written: its lock file goes."""
        if not segment.maybe_written or segment.path is None or self._journal is None:
            return
        owner = LedgerJournal.owner_of(segment.path)
        still = any(s.path is not None and LedgerJournal.owner_of(s.path) == owner for s in self._pending)
        if not still and owner in self._journal.adopted_owners():
            self._journal.release_orphans({owner})

    def _set_count(self, segment: Segment, count: int) -> None:
        self._count_waiting(count - segment.count)
        segment.count = count

    def _count_waiting(self, change: int) -> None:
        self._waiting += change
        self._on_waiting(self._waiting)

    def _lose(self, count: int, why: str) -> None:
        self.lost += count
        self._on_lost(count)
        logger.warning(f"{count} usage row(s) lost: {why}")


def _touch_rollup_turn(db: sa.Connection) -> None:
    """A write that changes nothing, to see whether the store takes writes."""
    db.execute(sa.update(tenant_meta).where(tenant_meta.c.name == ROLLUP_TURN).values(value=tenant_meta.c.value))


def _inserting(rows: Sequence[Row], only_missing: bool) -> Callable[[sa.Connection], int]:
    """The unit of work that inserts `rows` (only those whose request id the database lacks, when
    `only_missing`); how many it inserted."""

    def insert(db: sa.Connection) -> int:
        todo = list(rows)
        if only_missing and todo:
            ids = [row["request_id"] for row in todo]
            moments = [row["at"] for row in todo]
            present = set(
                db.scalars(
                    sa.select(usage.c.request_id).where(
                        usage.c.at.between(min(moments), max(moments)), usage.c.request_id.in_(ids)
                    )
                )
            )
            todo = [row for row in todo if row["request_id"] not in present]
        if todo:
            db.execute(sa.insert(usage), todo)
        return len(todo)

    return insert
