"""Open the database the settings name, once per process: the SQLite file by default, a shared one by URL.

Every part that keeps data there — accounts and tokens, telemetry, logins, stored responses, client
keys, their counters and the usage ledger — works on the one database (one engine, one pool) the
process opened, with every chain of migrations of their tables run at the opening. A second engine on
the same SQLite file in one process is a second pool for nothing; on the way to it, the store's file
was once opened and closed outside SQLite, which broke the first engine's locks (sqlite_database.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from q2api.store.database import StoreDatabase
from q2api.store.database_url import parse_database_url
from q2api.store.migrations import MigrationChain
from q2api.store.sqlite_database import open_sqlite_file


async def open_database(
    database_url: str | None, data_dir: str | Path, chains: Sequence[MigrationChain]
) -> StoreDatabase:
    """`database_url` empty: the SQLite file in `data_dir`; else the shared database it names; `chains`
    migrated, in the order given. The caller closes it (`await database.close()`) in the same event loop.

    Raises ValueError for a malformed URL, StoreUnavailable when the database cannot be reached or
    migrated (SchemaTooNew when a newer q2api migrated it).
    """
    if not database_url:
        # Setting the file up may wait for another worker's set-up (a file lock): not on the event loop.
        return await asyncio.to_thread(functools.partial(open_sqlite_file, Path(data_dir), chains))
    url = parse_database_url(database_url)
    # Imported here: a shared database brings SQLAlchemy's asyncio extension and the async drivers,
    # which the default SQLite store never needs.
    from q2api.store.shared_database import SharedDatabase, migrate_shared_database

    shared = SharedDatabase(url)
    try:
        await migrate_shared_database(shared, chains)
    except BaseException:
        await shared.dispose()
        raise
    return shared


@contextlib.asynccontextmanager
async def opened_database(
    database_url: str | None, data_dir: str | Path, chains: Sequence[MigrationChain]
) -> AsyncIterator[StoreDatabase]:
    """`open_database` for the length of a block, closed at its end however it ends."""
    database = await open_database(database_url, data_dir, chains)
    try:
        yield database
    finally:
        await database.close()
