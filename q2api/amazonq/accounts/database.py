"""The shared store's connections to its database, and what a database fault becomes.

Two engines on one URL: a pooled one for short reads and writes, and an
unpooled one for lock connections, whose close really ends the database
session (and with it whatever lock it held). Every fault comes out as
`StoreUnavailable`, naming the store with its password masked and never a
statement's parameters; a write picked as a deadlock victim runs again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from q2api.amazonq.accounts.database_url import DatabaseUrl
from q2api.amazonq.accounts.store_protocol import StoreUnavailable

T = TypeVar("T")
_WRITE_ATTEMPTS = 3
_DEADLOCK_CODES = frozenset({"40P01", "40001", 1213, 1205})  # PostgreSQL SQLSTATEs, MySQL error numbers
# MySQL's default REPEATABLE READ adds gap locks that only make concurrent writers deadlock.
_ISOLATION = "READ COMMITTED"


class Database:
    def __init__(self, url: DatabaseUrl) -> None:
        self.url = url
        self.engine = sa.create_engine(url.url, pool_pre_ping=True, isolation_level=_ISOLATION)
        self._lock_engine = sa.create_engine(url.url, poolclass=sa.NullPool, isolation_level=_ISOLATION)

    def read(self, work: Callable[[sa.Connection], T]) -> T:
        with self.failures(), self.engine.connect() as connection:
            return work(connection)

    def write(self, work: Callable[[sa.Connection], T]) -> T:
        """`work` in one transaction, run again (up to three times) if the database broke a deadlock with it."""
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                with self.failures(), self.engine.begin() as connection:
                    return work(connection)
            except StoreUnavailable as exc:
                if attempt == _WRITE_ATTEMPTS or not _is_deadlock(exc.__cause__):
                    raise
        raise AssertionError("unreachable")

    def connect_for_lock(self) -> sa.Connection:
        """A connection of its own (never pooled): closing it releases every lock it holds."""
        with self.failures():
            return self._lock_engine.connect()

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

    def dispose(self) -> None:
        self.engine.dispose()
        self._lock_engine.dispose()


def _is_deadlock(error: BaseException | None) -> bool:
    if not isinstance(error, DBAPIError) or error.orig is None:
        return False
    code = getattr(error.orig, "sqlstate", None) or (error.orig.args[0] if error.orig.args else None)
    return code in _DEADLOCK_CODES
