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

from q2api.accounts.database_locks import DatabaseLocks, lock_namespace
from q2api.accounts.database_url import DatabaseUrl
from q2api.accounts.migrations import MigrationChain, apply_chains
from q2api.accounts.secret_box import SecretBox
from q2api.accounts.shared_database import SharedDatabase
from q2api.accounts.store import DEFAULT_CHAINS, SqlAccountStore
from q2api.accounts.store_protocol import StoreUnavailable

MIGRATION_LOCK = "migrate"
MIGRATION_LOCK_TIMEOUT = 120.0  # seconds a replica waits for another one's migration
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


async def migrate_shared_database(db: SharedDatabase, chains: Sequence[MigrationChain]) -> DatabaseLocks:
    """Bring `chains` up to date under the database's migration lock; the database's locks, for later use.

    Tables kept beside the accounts (client keys) are migrated through here too, with their own chain.
    Raises StoreUnavailable, SchemaTooNew.
    """
    url = db.url
    with db.failures():
        # The first contact is bounded like any unit of work: a server that accepts the connection
        # and never answers is a clear error at start-up, not a hang (aiomysql's connect_timeout
        # covers the TCP connect only).
        async with db.bounded(), db.engine.connect() as connection:
            locks = DatabaseLocks(url.kind, await lock_namespace(connection, url.kind))
        migration_bound = MIGRATION_LOCK_TIMEOUT + (db.deadline or 0.0)  # it may wait for another replica's
        try:
            async with (
                asyncio.timeout(migration_bound),
                db.engine.connect() as connection,
                locks.held(connection, MIGRATION_LOCK, MIGRATION_LOCK_TIMEOUT),
            ):
                await connection.run_sync(apply_chains, chains)
        except TimeoutError:
            raise StoreUnavailable(
                f"the shared store {url.masked} did not finish its migration within {migration_bound:g}s"
            ) from None
    return locks


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
