"""The shared store's connections to its database, and what a database fault becomes.

Two async engines (SQLAlchemy's asyncio extension) on one URL: a pooled one
for short reads and writes, and an unpooled one for lock connections, whose
close really ends the database session (and with it whatever lock it held).
Every fault comes out as `StoreUnavailable`, naming the store with its password
masked and never a statement's parameters; a write picked as a deadlock victim
runs again.

A write, once begun, runs to its end even if its caller is cancelled (a client
that hangs up, a shutdown): a rotated refresh token that is not committed is
lost for good. Reads simply stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from q2api.accounts.database_url import DatabaseUrl
from q2api.accounts.store_protocol import StoreUnavailable

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]
_WRITE_ATTEMPTS = 3
_DEADLOCK_CODES = frozenset({"40P01", "40001", 1213, 1205})  # PostgreSQL SQLSTATEs, MySQL error numbers
# MySQL's default REPEATABLE READ adds gap locks that only make concurrent writers deadlock.
_ISOLATION = "READ COMMITTED"
_CLOSE_WAIT = 10.0  # seconds `dispose` waits for running writes: a hung database must not hang a shutdown


class Database:
    def __init__(self, url: DatabaseUrl) -> None:
        """Raises StoreUnavailable when the URL's TLS files cannot be read; connects only when first used."""
        self.url = url
        self._writes: set[asyncio.Task[object]] = set()  # shielded writes still running
        with self.failures():
            engine_url, connect_args = url.engine_arguments()
        # hide_parameters: SQLAlchemy's errors would otherwise quote each statement's parameters (token
        # ciphertexts, labels) in their message, and so in every traceback that chains them.
        self.engine: AsyncEngine = create_async_engine(
            engine_url,
            connect_args=connect_args,
            pool_pre_ping=True,
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

    async def read(self, work: Work[T]) -> T:
        with self.failures():
            async with self.engine.connect() as connection:
                return await work(connection)

    async def write(self, work: Work[T]) -> T:
        """`work` in one transaction, run again (up to three times) if the database broke a deadlock with it."""
        task = asyncio.get_running_loop().create_task(self._write(work))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        # Shielded: a cancelled caller stops waiting, the transaction still commits (or rolls back) whole.
        return await asyncio.shield(task)

    async def _write(self, work: Work[T]) -> T:
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                with self.failures():
                    async with self.engine.begin() as connection:
                        return await work(connection)
            except StoreUnavailable as exc:
                if attempt == _WRITE_ATTEMPTS or not _is_deadlock(exc.__cause__):
                    raise
        raise AssertionError("unreachable")

    async def connect_for_lock(self) -> AsyncConnection:
        """A connection of its own (never pooled): closing it releases every lock it holds."""
        with self.failures():
            return await self._lock_engine.connect()

    @contextlib.contextmanager
    def failures(self) -> Iterator[None]:
        try:
            yield
        except DBAPIError as exc:
            fault = exc.orig if exc.orig is not None else exc
            raise StoreUnavailable(
                f"the shared store {self.url.masked} failed: {type(fault).__name__}: {fault}"
            ) from exc
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"the shared store {self.url.masked} failed: {type(exc).__name__}") from exc
        except OSError as exc:  # the drivers' own connection errors (refused, unreachable, timed out, TLS files)
            raise StoreUnavailable(f"the shared store {self.url.masked} failed: {type(exc).__name__}: {exc}") from exc

    async def dispose(self) -> None:
        """Let running writes finish (for a while), then close every connection."""
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=_CLOSE_WAIT)
        await self.engine.dispose()
        await self._lock_engine.dispose()


async def first_row(db: AsyncConnection, query: sa.Executable) -> sa.Row[Any] | None:
    return (await db.execute(query)).first()


async def all_rows(db: AsyncConnection, query: sa.Executable) -> list[sa.Row[Any]]:
    return list((await db.execute(query)).all())


async def affected_rows(db: AsyncConnection, statement: sa.Executable) -> int:
    """How many rows `statement` changed (MySQL counts the rows matched: its connections ask for FOUND_ROWS)."""
    return (await db.execute(statement)).rowcount


def _is_deadlock(error: BaseException | None) -> bool:
    if not isinstance(error, DBAPIError) or error.orig is None:
        return False
    code = getattr(error.orig, "sqlstate", None) or (error.orig.args[0] if error.orig.args else None)
    return code in _DEADLOCK_CODES
