"""Where the tenants' tables live: the SQLite file of the account store, or the shared database.

The same databases as the account store's (q2api.store.sqlite_database, shared_database), opened
and migrated the same way, with the tenants' own chain of steps: every query is written once, as a
plain (synchronous) SQLAlchemy function of a connection, run on a worker thread for the SQLite file,
through the asyncio engine's `run_sync` on a shared database (bounded in time, faults as
StoreUnavailable, deadlock victims run again).
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from q2api.store.database import StoreDatabase, Work
from q2api.store.database_url import parse_database_url
from q2api.store.sqlite_database import open_sqlite_file
from q2api.tenants.tables import TENANT_MIGRATIONS

T = TypeVar("T")


class TenantDatabase:
    """Runs `Work` in one transaction, on SQLite or on the shared database."""

    def __init__(self, database: StoreDatabase) -> None:
        self._database = database

    async def write(self, work: Work[T]) -> T:
        return await self._database.write(work)

    async def read(self, work: Work[T]) -> T:
        return await self._database.read(work)

    async def close(self) -> None:
        await self._database.dispose()


def _synchronous_normal(connection: Any, _record: Any) -> None:
    # Safe with WAL (which the store's file is in), and it spares each counting transaction its fsync
    # (a power cut may lose the last ones: counts of a minute, not accounts) — admissions ~20x faster
    # (bench/bench_key_admission.py). These connections only: the account store's keep their default.
    cursor = connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


async def open_tenant_database(database_url: str | None, data_dir: str | Path) -> TenantDatabase:
    """The tenants' tables beside the accounts (`database_url` empty: the SQLite store's file), migrated.

    Raises ValueError for a malformed URL, StoreUnavailable when the database cannot be reached or
    migrated (SchemaTooNew when a newer q2api migrated it).
    """
    if not database_url:
        # Setting the file up may wait for another worker's (a file lock): not on the event loop.
        sqlite = await asyncio.to_thread(functools.partial(open_sqlite_file, Path(data_dir), (TENANT_MIGRATIONS,)))
        sa.event.listen(sqlite.engine, "connect", _synchronous_normal)
        sqlite.engine.dispose()  # the connection the migration pooled predates the listener
        return TenantDatabase(sqlite)
    # Imported here, as for the account store: the asyncio extension and the drivers only with a shared database.
    from q2api.store.shared_database import SharedDatabase, migrate_shared_database

    shared = SharedDatabase(parse_database_url(database_url))
    try:
        await migrate_shared_database(shared, (TENANT_MIGRATIONS,))
    except BaseException:
        await shared.dispose()
        raise
    return TenantDatabase(shared)
