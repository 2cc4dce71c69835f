"""What the store's database does, whichever it is: run a unit of work, and turn its faults into one error.

A unit of work is a plain synchronous SQLAlchemy function of a connection; the
SQLite file runs it on a worker thread (sqlite_database.py), a shared
PostgreSQL or MySQL database through the async engine's `run_sync`
(shared_database.py), so the store is written once for the three.

Every fault comes out as `StoreUnavailable`, naming the store (a URL with its
password masked) and never a statement's parameters; a write picked as a
deadlock victim runs again.

Nothing waits on a shared database without a bound: a connection is made
within CONNECT_TIMEOUT, a pooled one is waited for within POOL_TIMEOUT, and
each unit of work (a read, one attempt of a write, taking a lock connection,
one lock call) is cut at UNIT_DEADLINE by an asyncio deadline, which also
covers a server that accepts a connection and then never answers (a frozen
database, a network partition). A cut unit is a `StoreUnavailable` like any
other fault. (The SQLite file's wait is its busy timeout.)

A write, once begun, runs to its end even if its
caller is cancelled (a client that hangs up, a shutdown): a rotated refresh
token that is not committed is lost for good. Reads simply stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from q2api.store.errors import StoreUnavailable

T = TypeVar("T")
Work = Callable[[sa.Connection], T]
DatabaseKind = Literal["sqlite", "postgresql", "mysql"]
_WRITE_ATTEMPTS = 3
_DEADLOCK_CODES = frozenset({"40P01", "40001", 1213, 1205})  # PostgreSQL SQLSTATEs, MySQL error numbers
_CLOSE_WAIT = 10.0  # seconds `dispose` waits for running writes: a hung database must not hang a shutdown
# Seconds. Constants, not settings: every unit of work here is a handful of small statements, which a
# healthy database answers in milliseconds; one that takes seconds is down for the gateway's purposes.
CONNECT_TIMEOUT = 5.0
POOL_TIMEOUT = 5.0  # waiting for a pooled connection when all are busy
UNIT_DEADLINE = 10.0
LOCK_CONNECTIONS = 4  # lock connections open at once, per process (each refresh in progress holds one)


class StoreDatabase(ABC):
    kind: DatabaseKind

    deadline: float | None = None  # seconds a unit of work may take; None: no asyncio deadline (SQLite)

    def __init__(self, name: str) -> None:
        """`name`: the store as errors name it ("the shared store postgresql://q2api:***@…")."""
        self._name = name
        self._writes: set[asyncio.Task[Any]] = set()  # shielded writes still running

    async def read(self, work: Work[T]) -> T:
        return await self._run(work, write=False, durable=True)

    async def write(self, work: Work[T], *, durable: bool = True) -> T:
        """`work` in one transaction, run again (up to three times) if the database broke a deadlock with it.

        `durable=False`: a power cut may lose this transaction once committed (SQLite then spares it its
        fsync, `PRAGMA synchronous=NORMAL`); for counts that are worth less than their cost, never for
        accounts and tokens. A shared database commits every transaction alike.
        """
        task = asyncio.get_running_loop().create_task(self._write(work, durable))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        # Shielded: a cancelled caller stops waiting, the transaction still commits (or rolls back) whole.
        return await asyncio.shield(task)

    async def _write(self, work: Work[T], durable: bool) -> T:
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                return await self._run(work, write=True, durable=durable)
            except StoreUnavailable as exc:
                if attempt == _WRITE_ATTEMPTS or not _is_deadlock(exc.__cause__):
                    raise
        raise AssertionError("unreachable")

    @abstractmethod
    async def _run(self, work: Work[T], *, write: bool, durable: bool) -> T:
        """`work` in one transaction (a write transaction takes the write lock up front where that matters)."""

    @abstractmethod
    async def _close(self) -> None: ...

    @contextlib.contextmanager
    def failures(self) -> Iterator[None]:
        try:
            yield
        except TimeoutError:
            raise StoreUnavailable(f"{self._name} did not answer within {self.deadline:g}s") from None
        except DBAPIError as exc:
            fault = exc.orig if exc.orig is not None else exc
            raise StoreUnavailable(f"{self._name} failed: {type(fault).__name__}: {fault}") from exc
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"{self._name} failed: {type(exc).__name__}") from exc
        except OSError as exc:  # the drivers' own connection errors (refused, unreachable, timed out, TLS files)
            raise StoreUnavailable(f"{self._name} failed: {type(exc).__name__}: {exc}") from exc

    @contextlib.asynccontextmanager
    async def bounded(self) -> AsyncIterator[None]:
        """The block within the deadline; one that overruns raises TimeoutError (`failures` names the store).

        The deadline also bounds the connection's clean-up on the way out, which a frozen server would hang.
        """
        async with asyncio.timeout(self.deadline):
            yield

    async def dispose(self) -> None:
        """Let running writes finish (for a while), then close every connection."""
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=_CLOSE_WAIT)
        await self._close()

    async def close(self) -> None:
        """`dispose`, by the name the stores built on the database close with."""
        await self.dispose()


def first_row(db: sa.Connection, query: sa.Executable) -> sa.Row[Any] | None:
    return db.execute(query).first()


def all_rows(db: sa.Connection, query: sa.Executable) -> list[sa.Row[Any]]:
    return list(db.execute(query).all())


def affected_rows(db: sa.Connection, statement: sa.Executable) -> int:
    """How many rows `statement` changed (MySQL counts the rows matched: its connections ask for FOUND_ROWS)."""
    result: Any = db.execute(statement)
    return int(result.rowcount)


def _is_deadlock(error: BaseException | None) -> bool:
    if not isinstance(error, DBAPIError) or error.orig is None:
        return False
    code = getattr(error.orig, "sqlstate", None) or (error.orig.args[0] if error.orig.args else None)
    return code in _DEADLOCK_CODES
