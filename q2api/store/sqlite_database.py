"""The embedded store's database: one SQLite file in the data directory, shared by the `--workers` of a machine.

SQLAlchemy's plain (synchronous) engine over the standard sqlite3 module, each
unit of work run on a worker thread: a busy timeout may hold a call for
seconds, which the event loop must not feel. (The asyncio extension with
aiosqlite costs a worker about 5 MB more and each call several thread hops
instead of one: bench/bench_store.py, figures in docs/architecture.md.)
Connections are pooled and handed from thread to thread, one unit of work at a
time each: opening one per call, as the hand-written store did, also closed the
file's last connection after every write, and SQLite checkpoints the WAL
whenever that happens (a write took ~28 ms instead of ~8). `close()` closes
them; a forked child never uses its parent's (each worker opens its own store).

Writes take SQLite's write lock up front (BEGIN IMMEDIATE), so a read-then-write
(seeding the environment account) cannot interleave with another process doing
the same; WAL mode plus the busy timeout lets the workers share the file
without "database is locked" errors.

One engine per file per process, and nothing but SQLite ever opens the file:
closing any descriptor of a file drops every POSIX lock the process holds on
it, so a descriptor opened and closed beside SQLite's (to create the file, set
its mode, copy it) leaves SQLite's connections believing in locks they lost,
and another process (a second worker, the CLI) then writes under them or
deletes the write-ahead log they still use (SQLite's "How To Corrupt An SQLite
Database File", §2.2). The file is made 0600 by creating it before any
connection exists (`open_sqlite_file`); its -wal and -shm get the same mode
from SQLite.
"""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from loguru import logger

from q2api.store.database import StoreDatabase, Work
from q2api.store.file_lock import exclusive_lock
from q2api.store.migrations import MigrationChain, apply_chains
from q2api.store.private_files import create_private_dir, create_private_file

T = TypeVar("T")
_WRITE_OPTION = "q2api_write"
_SYNCHRONOUS = "q2api_synchronous"  # the connection's `PRAGMA synchronous`, as last set here
DB_FILENAME = "q2api.sqlite3"
INIT_LOCK_FILENAME = "store-init.lock"
BUSY_TIMEOUT = 10.0  # seconds a SQLite call waits for another worker's write


class SqliteDatabase(StoreDatabase):
    kind = "sqlite"

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        """Connects only when first used; `busy_timeout`: seconds a call waits for another process's write."""
        super().__init__(f"the SQLite store {path}")
        self.path = path
        # `timeout` is SQLite's busy timeout: another worker's short write makes us wait, not fail. A file
        # database gets SQLAlchemy's QueuePool, and connections that may move between threads.
        self.engine = sa.create_engine(
            f"sqlite:///{path}", connect_args={"timeout": busy_timeout}, hide_parameters=True
        )
        # The sqlite3 module's own transaction handling begins late and never "immediately": it is
        # switched off, and the transactions begun here instead (SQLAlchemy's documented recipe).
        sa.event.listen(self.engine, "connect", _driver_autocommit)
        sa.event.listen(self.engine, "begin", _begin)

    def run_here(self, work: Work[T], *, write: bool, durable: bool = True) -> T:
        """`work` in one transaction, in the calling thread (opening the store, before any event loop).

        `durable=False`: committed without an fsync (`PRAGMA synchronous=NORMAL`, safe with WAL: a power
        cut may lose the last such transactions, never corrupt the file). Counting admissions this way is
        ~20x faster (bench/bench_key_admission.py); accounts and tokens keep SQLite's FULL.
        """
        with self.failures(), self.engine.connect() as connection:
            if write:  # a read commits nothing: the connection's setting stays as the last write left it
                _synchronous(connection, "FULL" if durable else "NORMAL")
                connection.execution_options(**{_WRITE_OPTION: True})
            with connection.begin():
                return work(connection)

    def migrate(self, chains: Sequence[MigrationChain]) -> None:
        """Bring the file's schema up to date (under the set-up lock): each step commits on its own."""
        with self.failures(), self.engine.connect() as connection:
            connection.execution_options(**{_WRITE_OPTION: True})
            apply_chains(connection, chains)

    def set_wal_mode(self) -> None:
        """Switch the file to WAL (once, under the set-up lock: a second simultaneous switch fails at once)."""
        with self.failures(), self.engine.connect() as connection:
            connection.connection.driver_connection.execute("PRAGMA journal_mode=WAL")  # type: ignore[union-attr]

    async def _run(self, work: Work[T], *, write: bool, durable: bool) -> T:
        return await asyncio.to_thread(self.run_here, work, write=write, durable=durable)

    async def _close(self) -> None:
        self.engine.dispose()


def open_sqlite_file(
    data_dir: Path, chains: Sequence[MigrationChain], *, busy_timeout: float = BUSY_TIMEOUT
) -> SqliteDatabase:
    """The store's SQLite file in `data_dir` (directory 0700, file 0600), in WAL mode, `chains` migrated.

    It may wait for another worker's set-up (a file lock): an event loop calls it in a thread. A
    process opens the file once, with every chain of the tables kept there (q2api.store.opening).
    """
    create_private_dir(data_dir)
    path = data_dir / DB_FILENAME
    db = SqliteDatabase(path, busy_timeout=busy_timeout)
    # `--workers` processes start together, and SQLite answers a second simultaneous switch to
    # WAL with "database is locked" at once (the busy timeout does not cover it): set the file up
    # one process at a time.
    with exclusive_lock(data_dir / INIT_LOCK_FILENAME):
        try:
            # Made 0600 before SQLite first opens it; a file already there is never opened but by SQLite.
            created = create_private_file(path)
            db.set_wal_mode()
            db.migrate(chains)
            if not created:
                _warn_if_shared(path)
        except BaseException:
            db.engine.dispose()  # a file that cannot be the store keeps no pooled connection open
            raise
    return db


def _warn_if_shared(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        # Not chmod-ed here: that would need a descriptor of the live file (see the module's docstring).
        logger.warning(
            f"the store's file {path} can be read by other users (mode {mode:04o}); it holds tokens: "
            f"chmod 600 {path} (and its -wal and -shm files) while no q2api process runs"
        )


def _synchronous(connection: sa.Connection, level: str) -> None:
    """The connection's `PRAGMA synchronous`, set outside any transaction and only when it changes."""
    record = connection.connection
    if record.info.get(_SYNCHRONOUS, "FULL") != level:
        record.driver_connection.execute(f"PRAGMA synchronous={level}")  # type: ignore[union-attr]
        record.info[_SYNCHRONOUS] = level


def _driver_autocommit(dbapi_connection: Any, _record: object) -> None:
    dbapi_connection.isolation_level = None


def _begin(connection: sa.Connection) -> None:
    write = connection.get_execution_options().get(_WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
