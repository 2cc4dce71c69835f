"""Opening the store on a shared database (PostgreSQL, MySQL/MariaDB): connect, migrate, lock refreshes there.

Every replica migrates at start-up under a database lock, so replicas that
start together neither race nor apply a step twice. A token refresh holds a
database lock (database_locks.py) that dies with its connection: a replica
killed mid-refresh blocks nobody. Secrets are Fernet-encrypted (secret_box.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from q2api.accounts.store import DEFAULT_CHAINS, SqlAccountStore
from q2api.store.database_locks import DatabaseLocks
from q2api.store.database_url import DatabaseUrl
from q2api.store.migrations import MigrationChain
from q2api.store.secret_box import SecretBox
from q2api.store.shared_database import SharedDatabase, migrate_shared_database

_LOCK_POLL_INTERVAL = 0.05  # seconds between attempts at a refresh lock another replica holds


async def open_shared_store(
    url: DatabaseUrl, secrets: SecretBox, chains: Sequence[MigrationChain] = DEFAULT_CHAINS
) -> SqlAccountStore:
    """Connect and bring the schema up to date (raises StoreUnavailable, SchemaTooNew)."""
    db = SharedDatabase(url)
    try:
        locks = await migrate_shared_database(db, chains)
    except BaseException:
        await db.dispose()
        raise
    return SqlAccountStore(db, secrets, _DatabaseRefreshLock(db, locks), url.masked)


class _DatabaseRefreshLock:
    def __init__(self, db: SharedDatabase, locks: DatabaseLocks) -> None:
        self._db = db
        self._locks = locks

    @contextlib.asynccontextmanager
    async def __call__(self, account_id: str) -> AsyncIterator[None]:
        name = f"refresh:{account_id}"
        # Closing the (unpooled) connection at the block's end ends the database session and so the lock.
        async with self._db.lock_connection() as connection:
            # Polled, not waited for in the database: a waiting statement could not be cancelled cleanly.
            while not await self._try_lock(connection, name):  # noqa: ASYNC110
                await asyncio.sleep(_LOCK_POLL_INTERVAL)
            yield

    async def _try_lock(self, connection: AsyncConnection, name: str) -> bool:
        with self._db.failures():
            async with self._db.bounded():
                return await self._locks.try_acquire(connection, name)
