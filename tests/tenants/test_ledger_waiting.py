"""The usage ledger never drops a row silently (issue 30, items 2 and 5): while the store is down rows
wait, in memory up to a bound and in the journal of the data directory past it, and are all written
once it answers; a row the database refuses on its own (a value it cannot hold) never holds the others
back and is counted; text longer than its column is cut to it; the journal of a process that died is
adopted by the next one, without writing a row twice. On SQLite, PostgreSQL and MariaDB alike.

The store is down for real: another connection holds SQLite's write lock (with a short busy timeout),
or the shared database is cut behind a proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from q2api.store.database import StoreDatabase
from q2api.store.sqlite_database import DB_FILENAME, open_sqlite_file
from q2api.tenants import ledger as ledger_module
from q2api.tenants.database import open_tenant_database
from q2api.tenants.ledger import UsageLedger, UsageRow
from q2api.tenants.ledger_journal import JOURNAL_DIRNAME, LedgerJournal
from q2api.tenants.tables import TENANT_MIGRATIONS, usage
from tests.support.fault_proxy import fault_proxy
from tests.support.gateway_harness import capture_logs
from tests.support.tenant_stores import DATABASE_KINDS, database_url_for

pytestmark = pytest.mark.asyncio

LONG_MODEL = "claude-" + "x" * 300


def row(n: int, *, model: str = "model-a", request_id: str | None = None) -> UsageRow:
    return UsageRow(
        time.time(), request_id or f"req_{n:06d}", "key-a", "acct", model, "/v1/messages", 200, 10, 2, 0, 0, 0.01,
        False, 50.0, 80.0,
    )  # fmt: skip


async def ledger_rows(database: StoreDatabase) -> list[sa.Row]:
    return await database.read(lambda db: list(db.execute(sa.select(usage.c.request_id, usage.c.model))))


def journal_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / JOURNAL_DIRNAME).glob("*.jsonl"))


class Outage:
    """A store `down()` for real and `up()` again: SQLite's write lock held by another connection, or
    a shared database cut behind a proxy."""

    def __init__(self, down: Callable[[], Awaitable[None]], up: Callable[[], Awaitable[None]]) -> None:
        self.down, self.up = down, up


@contextlib.asynccontextmanager
async def database_with_outage(kind: str, tmp_path: Path) -> AsyncIterator[tuple[StoreDatabase, Outage]]:
    if kind == "sqlite":
        database = await asyncio.to_thread(open_sqlite_file, tmp_path, (TENANT_MIGRATIONS,), busy_timeout=0.2)
        holder = sqlite3.connect(tmp_path / DB_FILENAME, isolation_level=None)

        async def down() -> None:
            holder.execute("BEGIN IMMEDIATE")

        async def up() -> None:
            holder.execute("ROLLBACK")

        try:
            yield database, Outage(down, up)
        finally:
            holder.close()
            await database.close()
        return
    with database_url_for(kind, tmp_path) as url:
        assert url is not None
        async with fault_proxy(url) as proxy:
            database = await open_tenant_database(proxy.url_through(url), tmp_path)
            try:
                yield database, Outage(proxy.cut, proxy.restore)
            finally:
                await database.close()


@pytest.mark.parametrize("kind", DATABASE_KINDS)
async def test_rows_wait_in_memory_then_in_the_journal_and_are_all_written_when_the_store_answers(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_module, "BATCH_ROWS", 20)
    monkeypatch.setattr(ledger_module, "MAX_BUFFERED_ROWS", 50)
    data_dir = tmp_path / "data"
    lost: list[int] = []
    waiting: list[int] = []
    async with database_with_outage(kind, tmp_path) as (database, outage):
        ledger = UsageLedger(
            database, retention_days=30, journal=LedgerJournal(data_dir), on_lost=lost.append, on_waiting=waiting.append
        )
        await outage.down()
        with capture_logs() as logs:
            for batch in range(10):
                for n in range(batch * 20, batch * 20 + 20):
                    ledger.record(row(n))
                assert await ledger.flush() is False  # the store is down: the rows wait
            assert ledger.waiting == 200 and waiting[-1] == 200
            assert ledger.in_memory <= 50  # the rest wait in the journal alone
            on_disk = sum(len(LedgerJournal.read(path)) for path in journal_files(data_dir))
            assert on_disk == 200  # every row is in the journal, whatever memory holds
            await outage.up()
            assert await ledger.flush() is True
        warnings = [line.message for line in logs.lines if line.level == "WARNING"]
        assert len(warnings) == 1 and "usage rows wait" in warnings[0]  # once for the outage, not per attempt
        assert ledger.waiting == 0 and waiting[-1] == 0 and lost == []
        written = await ledger_rows(database)
        assert sorted(r.request_id for r in written) == [f"req_{n:06d}" for n in range(200)]  # each once
        assert journal_files(data_dir) == []
        await ledger.close()


REFUSE_ONE_ROW = {
    "sqlite": "CREATE TRIGGER refuse_one BEFORE INSERT ON q2api_usage WHEN NEW.request_id = 'req_refused' "
    "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    "postgresql": "ALTER TABLE q2api_usage ADD CONSTRAINT refuse_one CHECK (request_id <> 'req_refused')",
    "mysql": "ALTER TABLE q2api_usage ADD CONSTRAINT refuse_one CHECK (request_id <> 'req_refused')",
}


@pytest.mark.parametrize("kind", DATABASE_KINDS)
async def test_a_row_the_database_refuses_never_holds_the_others_back_and_is_counted(kind: str, tmp_path: Path) -> None:
    lost: list[int] = []
    with database_url_for(kind, tmp_path) as url:
        database = await open_tenant_database(url, tmp_path)
        try:
            await database.write(lambda db: db.exec_driver_sql(REFUSE_ONE_ROW[kind]))
            ledger = UsageLedger(
                database, retention_days=30, journal=LedgerJournal(tmp_path / "data"), on_lost=lost.append
            )
            ledger.record(row(1))
            ledger.record(row(2, request_id="req_refused"))
            ledger.record(row(3))
            ledger.record(row(4, model=LONG_MODEL))  # a model id longer than the column: cut, written
            with capture_logs() as logs:
                assert await ledger.flush() is True
                for n in range(5, 8):  # later rows are not blocked
                    ledger.record(row(n))
                assert await ledger.flush() is True
            assert lost == [1] and ledger.lost == 1 and ledger.waiting == 0
            assert any("req_refused" in line.message and line.level == "WARNING" for line in logs.lines)
            written = {r.request_id: r.model for r in await ledger_rows(database)}
            assert sorted(written) == [
                "req_000001",
                "req_000003",
                "req_000004",
                "req_000005",
                "req_000006",
                "req_000007",
            ]
            assert written["req_000004"] == LONG_MODEL[:255]
            assert journal_files(tmp_path / "data") == []
            await ledger.close()
        finally:
            await database.close()


# A process that records rows and dies before its ledger wrote them all: `committed` rows are written
# (and their journal file kept, as if it died between the commit and the deletion), the rest are not.
DYING_PROCESS = """
import asyncio, os, signal, sys, time
from pathlib import Path
from q2api.tenants.database import open_tenant_database
from q2api.tenants.ledger import UsageLedger, UsageRow
from q2api.tenants.ledger_journal import LedgerJournal

async def main(url, data_dir, committed, pending):
    database = await open_tenant_database(url or None, data_dir)
    journal = LedgerJournal(Path(data_dir))
    journal.discard = lambda path: None  # dies after each commit, before the file goes
    ledger = UsageLedger(database, retention_days=30, journal=journal)
    def row(n):
        return UsageRow(time.time(), f"req_{n:06d}", "key-a", "acct", "m", "/v1/messages", 200, 1, 1, 0, 0, 0.0, False, 1.0, 2.0)
    for n in range(committed):
        ledger.record(row(n))
    assert await ledger.flush()
    for n in range(committed, committed + pending):
        ledger.record(row(n))
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


@pytest.mark.parametrize("kind", DATABASE_KINDS)
async def test_the_journal_of_a_killed_process_is_adopted_and_written_once(kind: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with database_url_for(kind, tmp_path) as url:
        dying = await asyncio.create_subprocess_exec(
            sys.executable, "-c", DYING_PROCESS, url or "", str(data_dir), "30", "45"
        )
        assert await asyncio.wait_for(dying.wait(), 60) == -signal.SIGKILL
        assert journal_files(data_dir) != []
        database = await open_tenant_database(url, data_dir)
        try:
            ledger = UsageLedger(database, retention_days=30, journal=LedgerJournal(data_dir), flush_seconds=0.05)
            ledger.start()  # adopts the dead process's journal at its first round
            deadline = time.monotonic() + 20
            while journal_files(data_dir) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling the disk
                await asyncio.sleep(0.05)
            await ledger.close()
            written = sorted(r.request_id for r in await ledger_rows(database))
            assert written == [f"req_{n:06d}" for n in range(75)]  # the 45 it never wrote, the 30 not twice
            assert ledger.lost == 0 and ledger.waiting == 0
            assert list((data_dir / JOURNAL_DIRNAME).iterdir()) == []  # its lock file went with it
        finally:
            await database.close()
