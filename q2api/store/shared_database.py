"""A shared store's database: PostgreSQL (asyncpg) or MySQL/MariaDB (aiomysql), for replicas on many machines.

Two async engines (SQLAlchemy's asyncio extension) on one URL: a pooled one
for the store's units of work, and an unpooled one for lock connections, whose
close really ends the database session (and with it whatever lock it held).
The units of work are synchronous SQLAlchemy run through `run_sync`: a query
waits on the event loop, never in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from q2api.store import database
from q2api.store.database import StoreDatabase, Work
from q2api.store.database_locks import DatabaseLocks, lock_namespace
from q2api.store.database_url import DatabaseUrl
from q2api.store.errors import StoreUnavailable
from q2api.store.migrations import MigrationChain, apply_chains

T = TypeVar("T")
# MySQL's default REPEATABLE READ adds gap locks that only make concurrent writers deadlock.
_ISOLATION = "READ COMMITTED"
_CONNECT_TIMEOUT_ARGUMENT = {"postgresql": "timeout", "mysql": "connect_timeout"}  # asyncpg, aiomysql
MIGRATION_LOCK = "migrate"
MIGRATION_LOCK_TIMEOUT = 120.0  # seconds a replica waits for another one's migration


class SharedDatabase(StoreDatabase):
    def __init__(self, url: DatabaseUrl, *, deadline: float | None = None) -> None:
        """Raises StoreUnavailable when the URL's TLS files cannot be read; connects only when first used.

        `deadline`: seconds a unit of work may take (database.UNIT_DEADLINE when None).
        """
        super().__init__(f"the shared store {url.masked}")
        self.url = url
        self.kind = url.kind
        self.deadline = database.UNIT_DEADLINE if deadline is None else deadline
        self._lock_slots = asyncio.Semaphore(database.LOCK_CONNECTIONS)
        self.locks: DatabaseLocks | None = None  # its named locks, once `migrate_shared_database` found its namespace
        with self.failures():
            engine_url, connect_args = url.engine_arguments()
        connect_timeout = min(database.CONNECT_TIMEOUT, self.deadline)
        connect_args = {_CONNECT_TIMEOUT_ARGUMENT[url.kind]: connect_timeout, **connect_args}
        # hide_parameters: SQLAlchemy's errors would otherwise quote each statement's parameters (token
        # ciphertexts, labels) in their message, and so in every traceback that chains them.
        self.engine: AsyncEngine = create_async_engine(
            engine_url,
            connect_args=connect_args,
            pool_pre_ping=True,
            pool_timeout=min(database.POOL_TIMEOUT, self.deadline),
            isolation_level=_ISOLATION,
            hide_parameters=True,
        )
        self._lock_engine: AsyncEngine = create_async_engine(
            engine_url,
            connect_args=connect_args,
            poolclass=sa.NullPool,
            isolation_level=_ISOLATION,
            hide_parameters=True,
        )

    async def _run(self, work: Work[T], *, write: bool, durable: bool) -> T:
        with self.failures():
            if write:
                async with self.bounded(), self.engine.begin() as connection:
                    return await connection.run_sync(work)
            async with self.bounded(), self.engine.connect() as connection:
                return await connection.run_sync(work)

    @contextlib.asynccontextmanager
    async def lock_connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection of its own (never pooled) for the block: its close at the end releases every lock it holds.

        At most LOCK_CONNECTIONS are open at once in this process (more wait their turn): forty admin
        refreshes must not take forty of a small database's connections.
        """
        async with self._lock_slots:
            with self.failures():
                async with self.bounded():
                    connection = await self._lock_engine.connect()
            try:
                yield connection
            finally:
                # Shielded, so that a cancelled holder still closes it (a lock left to the garbage collector
                # stays taken), and bounded, so that a frozen database cannot keep the slot.
                await asyncio.shield(self._close_quietly(connection))

    async def _close_quietly(self, connection: AsyncConnection) -> None:
        # A close that fails still drops the connection (SQLAlchemy terminates what it cannot reset), and
        # the block's own outcome is what the holder must see.
        with contextlib.suppress(Exception):
            async with self.bounded():
                await connection.close()

    async def _close(self) -> None:
        await self.engine.dispose()
        await self._lock_engine.dispose()


async def migrate_shared_database(db: SharedDatabase, chains: Sequence[MigrationChain]) -> DatabaseLocks:
    """Bring `chains` up to date under the database's migration lock; the database's locks, for later use
    (kept as `db.locks` too).

    A process migrates its database once, with every chain of the tables kept there (q2api.store.opening).
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
    db.locks = locks
    return locks
