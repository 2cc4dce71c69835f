"""The store's SQLite file: nothing but SQLite ever opens it, so no opening can drop the locks of the
connections a process already has on it, and it is 0600 before SQLite first opens it.

Closing any descriptor of a file drops every POSIX lock the process holds on that file (SQLite's "How
To Corrupt An SQLite Database File", §2.2). An opening that made the file private by opening and
closing it released the write lock of a connection of the same process, and another process then
wrote under it (issue 30).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from loguru import logger

from q2api.accounts.store import DEFAULT_CHAINS
from q2api.store.sqlite_database import DB_FILENAME, open_sqlite_file
from tests.support.gateway_harness import capture_logs

# Another process reads the file and closes it: the last connection to close checkpoints the write-ahead
# log and deletes it, which SQLite does only when no other connection (of any process) holds its lock.
READ_AND_CLOSE = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1])
connection.execute("SELECT count(*) FROM q2api_meta").fetchall()
connection.close()
"""


def other_process_reads_and_closes(path: Path) -> None:
    subprocess.run([sys.executable, "-c", READ_AND_CLOSE, str(path)], timeout=30, check=True)


def test_opening_the_file_again_keeps_the_locks_of_the_connections_the_process_has(tmp_path: Path) -> None:
    open_sqlite_file(tmp_path, DEFAULT_CHAINS).engine.dispose()
    path = tmp_path / DB_FILENAME
    wal = tmp_path / f"{DB_FILENAME}-wal"
    holder = sqlite3.connect(path)  # a connection of this process, in WAL mode: it holds a lock on the file
    holder.execute("SELECT count(*) FROM q2api_meta").fetchall()
    other_process_reads_and_closes(path)
    assert wal.exists()  # not the last connection: the log stays
    again = open_sqlite_file(tmp_path, DEFAULT_CHAINS)  # a second opening in the same process
    again.engine.dispose()
    other_process_reads_and_closes(path)
    assert wal.exists()  # the holder's lock survived the opening: the other process did not delete the log
    holder.close()
    other_process_reads_and_closes(path)
    assert not wal.exists()  # now it was the last one


@pytest.mark.parametrize("umask", [0o022, 0o277])
def test_a_new_file_is_private_before_sqlite_opens_it_and_its_wal_too(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        database = open_sqlite_file(tmp_path / "data", DEFAULT_CHAINS)
    finally:
        os.umask(previous)
    try:
        data_dir = tmp_path / "data"
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        with sqlite3.connect(data_dir / DB_FILENAME) as db:  # a reader keeps the -wal and -shm files there
            db.execute("SELECT count(*) FROM q2api_accounts").fetchone()
            for name in (DB_FILENAME, f"{DB_FILENAME}-wal", f"{DB_FILENAME}-shm"):
                assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600, name
    finally:
        database.engine.dispose()


def test_a_file_others_can_read_is_named_in_a_warning_and_left_as_it_is(tmp_path: Path) -> None:
    open_sqlite_file(tmp_path, DEFAULT_CHAINS).engine.dispose()
    path = tmp_path / DB_FILENAME
    path.chmod(0o644)  # as an operator's copy might have left it
    with capture_logs() as logs:
        open_sqlite_file(tmp_path, DEFAULT_CHAINS).engine.dispose()
    warnings = [line.message for line in logs.lines if line.level == "WARNING"]
    assert len(warnings) == 1 and str(path) in warnings[0] and "0644" in warnings[0] and "chmod 600" in warnings[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # never chmod-ed from here: that needs a descriptor
    logger.complete()
