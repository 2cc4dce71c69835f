"""The account store on a shared database (PostgreSQL, MySQL/MariaDB): its refresh locks live there.

Every replica migrates at start-up under a database lock, so replicas that
start together neither race nor apply a step twice (q2api.store.shared_database).
A token refresh holds a database lock (q2api.store.database_locks) that dies with
its connection: a replica killed mid-refresh blocks nobody. Secrets are
Fernet-encrypted (q2api.store.secret_box).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.ext.asyncio import AsyncConnection

from q2api.accounts.store import RefreshLock
from q2api.store.database_locks import DatabaseLocks
from q2api.store.shared_database import SharedDatabase

_LOCK_POLL_INTERVAL = 0.05  # seconds between attempts at a refresh lock another replica holds


def database_refresh_lock(db: SharedDatabase) -> RefreshLock:
    """The refresh lock of the account store on `db` (migrated: its locks' namespace is known)."""
    if db.locks is None:
        raise RuntimeError("the shared database must be migrated (migrate_shared_database) before it is used")
    return _DatabaseRefreshLock(db, db.locks)


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
