"""The shared store's connections to its database, and what a database fault becomes.

Two async engines (SQLAlchemy's asyncio extension) on one URL: a pooled one
for short reads and writes, and an unpooled one for lock connections, whose
close really ends the database session (and with it whatever lock it held).
Every fault comes out as `StoreUnavailable`, naming the store with its password
masked and never a statement's parameters; a write picked as a deadlock victim
runs again.

Nothing waits on the database without a bound: a connection is made within
CONNECT_TIMEOUT, a pooled one is waited for within POOL_TIMEOUT, and each unit
of work (a read, one attempt of a write, taking a lock connection, one lock
call) is cut at UNIT_DEADLINE by an asyncio deadline, which also covers a
server that accepts a connection and then never answers (a frozen database,
a network partition). A cut unit is a `StoreUnavailable` like any other fault.

A write, once begun, runs to its end even if its caller is cancelled (a client
that hangs up, a shutdown): a rotated refresh token that is not committed is
lost for good. Reads simply stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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
# Seconds. Constants, not settings: every unit of work here is a handful of small statements, which a
# healthy database answers in milliseconds; one that takes seconds is down for the gateway's purposes.
CONNECT_TIMEOUT = 5.0
POOL_TIMEOUT = 5.0  # waiting for a pooled connection when all are busy
UNIT_DEADLINE = 10.0
LOCK_CONNECTIONS = 4  # lock connections open at once, per process (each refresh in progress holds one)
_CONNECT_TIMEOUT_ARGUMENT = {"postgresql": "timeout", "mysql": "connect_timeout"}  # asyncpg, aiomysql


class Database:
    def __init__(self, url: DatabaseUrl, *, deadline: float | None = None) -> None:
        """Raises StoreUnavailable when the URL's TLS files cannot be read; connects only when first used.

        `deadline`: seconds a unit of work may take (UNIT_DEADLINE when None).
        """
        self.url = url
        self.deadline = UNIT_DEADLINE if deadline is None else deadline
        self._writes: set[asyncio.Task[object]] = set()  # shielded writes still running
        self._lock_slots = asyncio.Semaphore(LOCK_CONNECTIONS)
        with self.failures():
            engine_url, connect_args = url.engine_arguments()
        connect_timeout = min(CONNECT_TIMEOUT, self.deadline)
        connect_args = {_CONNECT_TIMEOUT_ARGUMENT[url.kind]: connect_timeout, **connect_args}
        # hide_parameters: SQLAlchemy's errors would otherwise quote each statement's parameters (token
        # ciphertexts, labels) in their message, and so in every traceback that chains them.
        self.engine: AsyncEngine = create_async_engine(
            engine_url,
            connect_args=connect_args,
            pool_pre_ping=True,
            pool_timeout=min(POOL_TIMEOUT, self.deadline),
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
            async with self.bounded(), self.engine.connect() as connection:
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
                    async with self.bounded(), self.engine.begin() as connection:
                        return await work(connection)
            except StoreUnavailable as exc:
                if attempt == _WRITE_ATTEMPTS or not _is_deadlock(exc.__cause__):
                    raise
        raise AssertionError("unreachable")

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

    @contextlib.asynccontextmanager
    async def bounded(self) -> AsyncIterator[None]:
        """The block within the deadline; one that overruns raises TimeoutError (`failures` names the store).

        The deadline also bounds the connection's clean-up on the way out, which a frozen server would hang.
        """
        async with asyncio.timeout(self.deadline):
            yield

    @contextlib.contextmanager
    def failures(self) -> Iterator[None]:
        try:
            yield
        except TimeoutError:
            raise StoreUnavailable(
                f"the shared store {self.url.masked} did not answer within {self.deadline:g}s"
            ) from None
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
