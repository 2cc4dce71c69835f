"""Named locks in the shared database, held by one connection and released when it ends.

PostgreSQL: session advisory locks (`pg_try_advisory_lock`), keyed by a
64-bit hash of the name. MySQL/MariaDB: `GET_LOCK`, which is server-wide,
so the name carries a hash of the database too. Either kind dies with its
connection: a replica killed while it holds one blocks nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from q2api.store.database_url import DatabaseKind

_POLL_INTERVAL = 0.05  # seconds between attempts of a blocking `held`


class LockTimeout(Exception):
    """Another process held the lock for longer than the caller would wait."""


class DatabaseLocks:
    def __init__(self, kind: DatabaseKind, namespace: str) -> None:
        """`namespace` names the store (its database and schema): two stores' locks never meet."""
        self._kind = kind
        self._namespace = namespace

    async def try_acquire(self, connection: AsyncConnection, name: str) -> bool:
        if self._kind == "postgresql":
            statement = sa.text("SELECT pg_try_advisory_lock(:key)").bindparams(key=self._pg_key(name))
        else:
            statement = sa.text("SELECT GET_LOCK(:name, 0)").bindparams(name=self._mysql_name(name))
        acquired = (await connection.execute(statement)).scalar()
        await connection.commit()  # the lock is the session's: do not leave a transaction open around it
        return bool(acquired)

    async def release(self, connection: AsyncConnection, name: str) -> None:
        if self._kind == "postgresql":
            statement = sa.text("SELECT pg_advisory_unlock(:key)").bindparams(key=self._pg_key(name))
        else:
            statement = sa.text("SELECT RELEASE_LOCK(:name)").bindparams(name=self._mysql_name(name))
        await connection.execute(statement)
        await connection.commit()

    @contextlib.asynccontextmanager
    async def held(self, connection: AsyncConnection, name: str, timeout: float) -> AsyncIterator[None]:
        """Hold `name` on `connection` for the block, waiting up to `timeout` seconds for it (start-up, the CLI)."""
        deadline = time.monotonic() + timeout
        while not await self.try_acquire(connection, name):
            if time.monotonic() > deadline:
                raise LockTimeout(f"the shared store's {name!r} lock stayed taken for {timeout:g}s")
            await asyncio.sleep(_POLL_INTERVAL)
        try:
            yield
        finally:
            await connection.rollback()  # a failed step may have left a transaction open
            await self.release(connection, name)

    def _digest(self, name: str) -> bytes:
        return hashlib.sha256(f"q2api:{self._namespace}:{name}".encode()).digest()

    def _pg_key(self, name: str) -> int:
        return int.from_bytes(self._digest(name)[:8], "big", signed=True)

    def _mysql_name(self, name: str) -> str:
        return "q2api." + self._digest(name).hex()[:40]  # GET_LOCK names are at most 64 characters


async def lock_namespace(connection: AsyncConnection, kind: DatabaseKind) -> str:
    """The database (and, on PostgreSQL, schema) this connection works in."""
    query = "SELECT current_database() || '.' || current_schema()" if kind == "postgresql" else "SELECT DATABASE()"
    return str((await connection.execute(sa.text(query))).scalar())
