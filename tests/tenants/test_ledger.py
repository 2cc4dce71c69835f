"""The usage ledger on its own: batches, the daily roll-up past the retention (reports still add up,
on every database), and rows that cannot be written counted instead of failing anyone."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
import sqlalchemy as sa

from q2api.store.errors import StoreUnavailable
from q2api.tenants.database import open_tenant_database
from q2api.tenants.ledger import UsageLedger, UsageRow
from q2api.tenants.rollup import roll_up
from q2api.tenants.tables import usage, usage_daily
from q2api.tenants.usage_report import usage_by
from tests.support.tenant_stores import DATABASE_KINDS, database_url_for

pytestmark = pytest.mark.asyncio
DAY = 86400.0


def row(at: float, label: str | None, status: int = 200, credits: float = 0.5) -> UsageRow:
    return UsageRow(
        at, "req_x", label, "acct", "model-a", "/v1/messages", status, 10, 2, 1, 0, credits, False, 100.0, 200.0
    )


@pytest.fixture(params=DATABASE_KINDS)
def database_url(request, tmp_path):
    with database_url_for(request.param, tmp_path) as url:
        yield url


async def test_rows_past_the_retention_become_daily_sums_that_reports_still_count(database_url, tmp_path) -> None:
    database = await open_tenant_database(database_url, tmp_path)
    try:
        ledger = UsageLedger(database, retention_days=30)
        now = time.time()
        for days_ago, label, status in [(40, "a", 200), (40, "a", 500), (40, "b", 200), (35, "a", 200), (2, "a", 200)]:
            ledger.record(row(now - days_ago * DAY, label, status))
        await ledger.close()
        before = await usage_by(database, "key", now - 60 * DAY)
        assert await roll_up(database, 30, now) == 4
        assert await roll_up(database, 30, now) == 0  # folded once only
        left = await database.read(lambda db: db.execute(sa.select(sa.func.count()).select_from(usage)).scalar_one())
        daily = await database.read(
            lambda db: db.execute(sa.select(sa.func.count()).select_from(usage_daily)).scalar_one()
        )
        assert left == 1 and daily == 3  # (day -40, a), (day -40, b), (day -35, a)
        after = await usage_by(database, "key", now - 60 * DAY)
        assert after == before
        assert {r["key"]: (r["requests"], r["errors"], r["credits"]) for r in after} == {
            "a": (4, 1, 2.0),
            "b": (1, 0, 0.5),
        }
        by_day = await usage_by(database, "day", now - 60 * DAY)
        assert [r["requests"] for r in by_day] == [3, 1, 1]
    finally:
        await database.close()


class FailingDatabase:
    """A store that refuses every write (down for good)."""

    async def write(self, work):
        raise StoreUnavailable("the key store failed: down")


async def test_rows_that_cannot_be_written_are_kept_then_counted_as_lost() -> None:
    lost: list[int] = []
    ledger = UsageLedger(FailingDatabase(), retention_days=30, on_lost=lost.append)  # type: ignore[arg-type]
    for _ in range(3):
        ledger.record(row(time.time(), "a"))
    assert await ledger.flush() is False  # kept for the next attempt, nobody failed
    assert lost == []
    await ledger.close()
    assert lost == [3]


class SlowDatabase:
    """Keeps what each write inserted, taking a moment over each (a shared database under load); like the
    store's, a write once begun commits even if its caller is cancelled."""

    def __init__(self) -> None:
        self.inserted: list[str] = []

    async def write(self, work):
        return await asyncio.shield(asyncio.ensure_future(self._commit(work)))

    async def _commit(self, work):
        await asyncio.sleep(0.01)
        recorder = RecordingConnection()
        result = work(recorder)  # what the unit of work returns, as the store's write gives it back
        self.inserted += recorder.request_ids
        return result


class RecordingConnection:
    def __init__(self) -> None:
        self.request_ids: list[str] = []

    def execute(self, _statement, rows):
        self.request_ids += [values["request_id"] for values in rows]


async def test_flushes_that_overlap_write_each_row_once() -> None:
    # The admin API's usage pages flush the ledger while its writer may be flushing too (found by the soak:
    # rows written twice and others never, one batch at a time).
    database = SlowDatabase()
    ledger = UsageLedger(database, retention_days=30)  # type: ignore[arg-type]
    written: list[str] = []
    for wave in range(5):
        for number in range(20):
            request_id = f"req_{wave}_{number}"
            ledger.record(dataclasses.replace(row(time.time(), "a"), request_id=request_id))
            written.append(request_id)
        await asyncio.gather(ledger.flush(), ledger.flush(), asyncio.sleep(0.005))
    await ledger.close()
    assert sorted(database.inserted) == sorted(written)


async def test_closing_while_the_writer_flushes_writes_each_row_once() -> None:
    database = SlowDatabase()
    ledger = UsageLedger(database, retention_days=30, flush_seconds=0.001)  # type: ignore[arg-type]
    ledger.start()
    written = [f"req_{number}" for number in range(50)]
    for request_id in written:
        ledger.record(dataclasses.replace(row(time.time(), "a"), request_id=request_id))
    await asyncio.sleep(0.005)  # the writer is inside its (slow) write now
    await ledger.close()
    assert sorted(database.inserted) == sorted(written)
