"""Where the tenants' tables live: the SQLite file of the account store, or the shared database.

Every query is written once, as a plain (synchronous) SQLAlchemy function of a connection. On the
shared database it runs through the asyncio engine's `run_sync` (q2api.accounts.database: pooled,
faults as StoreUnavailable, deadlock victims run again); on SQLite through a synchronous engine in a
worker thread, so that a busy timeout is never felt by the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from q2api.accounts.database import Database
from q2api.accounts.database_url import parse_database_url
from q2api.accounts.private_files import create_private_file
from q2api.accounts.store import DB_FILENAME
from q2api.accounts.store_protocol import StoreUnavailable
from q2api.tenants.tables import create_tenant_tables

T = TypeVar("T")
Work = Callable[[sa.Connection], T]
_SQLITE_BUSY_SECONDS = 10.0  # another worker's write makes us wait this long, not fail
_CREATE_ATTEMPTS = 3  # replicas starting together may race to create the tables


class TenantDatabase:
    """Runs `Work` in one transaction, on SQLite or on the shared database."""

    def __init__(self, *, shared: Database | None = None, sqlite_path: Path | None = None) -> None:
        self._shared = shared
        self._sqlite: sa.Engine | None = None
        self.kind = "sqlite" if shared is None else shared.url.kind
        if shared is None:
            assert sqlite_path is not None
            self._sqlite = sa.create_engine(
                f"sqlite:///{sqlite_path}", connect_args={"timeout": _SQLITE_BUSY_SECONDS}, hide_parameters=True
            )
            sa.event.listen(self._sqlite, "connect", _sqlite_connection)
            self.where = str(sqlite_path)
        else:
            self.where = shared.url.masked

    async def write(self, work: Work[T]) -> T:
        if self._shared is not None:
            return await self._shared.write(lambda connection: connection.run_sync(work))
        return await asyncio.to_thread(self._sqlite_run, work)

    async def read(self, work: Work[T]) -> T:
        if self._shared is not None:
            return await self._shared.read(lambda connection: connection.run_sync(work))
        return await asyncio.to_thread(self._sqlite_run, work)

    def _sqlite_run(self, work: Work[T]) -> T:
        assert self._sqlite is not None
        with self._failures(), self._sqlite.begin() as connection:
            return work(connection)

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            fault = getattr(exc, "orig", None) or exc
            raise StoreUnavailable(f"the key store {self.where} failed: {type(fault).__name__}: {fault}") from exc

    async def create_tables(self) -> None:
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                await self.write(create_tenant_tables)
                return
            except StoreUnavailable:
                if attempt == _CREATE_ATTEMPTS:
                    raise
                await asyncio.sleep(0.2 * attempt)  # another replica was creating them: look again

    async def close(self) -> None:
        if self._shared is not None:
            await self._shared.dispose()
        if self._sqlite is not None:
            self._sqlite.dispose()


def _sqlite_connection(connection: Any, _record: Any) -> None:
    # WAL (as the account store sets it on the same file): readers never block the writer, nor it them.
    # synchronous=NORMAL, safe with WAL, spares each counting transaction its fsync (a power cut may
    # lose the last ones: counts of a minute, not accounts), for these connections only.
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_file(data_dir: Path) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / DB_FILENAME
    create_private_file(path)  # 0600 from the first byte, as the account store makes it
    return path


async def open_tenant_database(database_url: str | None, data_dir: str | Path) -> TenantDatabase:
    """The tenants' tables beside the accounts (`database_url` empty: the SQLite store's file), created if missing.

    Raises ValueError for a malformed URL, StoreUnavailable when the database cannot be reached.
    """
    if database_url:
        database = TenantDatabase(shared=Database(parse_database_url(database_url)))
    else:
        path = await asyncio.to_thread(_sqlite_file, Path(data_dir))
        database = TenantDatabase(sqlite_path=path)
    try:
        await database.create_tables()
    except BaseException:
        await database.close()
        raise
    return database
