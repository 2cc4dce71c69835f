"""The usage ledger's journal: every row in a file of the data directory until the database has it.

A request's row is appended (one `write`, no fsync) to this process's current segment the moment the
request is over, before the ledger writes it to the database. The file outlives the process: a worker
killed with `kill -9` loses no row (the kernel keeps what was written), a machine that loses power
loses at most the rows of the last second (each segment is fsynced when it is sealed, once a second).
A store that is down for long costs memory only up to a bound; past it the rows live in the journal
alone, and are read back when the store returns.

    usage-journal/
        <owner>.lock        held (flock) by the process that writes <owner>-*; free once it is dead
        <owner>-<n>.jsonl   one segment: JSON lines, at most about a batch of rows

A segment is written to the database in one transaction, then deleted. A process that finds another
one's lock free (the owner died) adopts its segments: their rows may have been committed just before
the owner died, so they are written only where the database lacks their request ids.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import secrets
from pathlib import Path

import orjson
from loguru import logger

from q2api.store.private_files import create_private_dir

JOURNAL_DIRNAME = "usage-journal"
_SUFFIX = ".jsonl"


@dataclasses.dataclass(slots=True)
class Segment:
    path: Path | None  # None: the journal could not hold it (its rows are in memory only)
    rows: list[dict[str, object]] | None  # None: in the file alone (spilled, or adopted and not read yet)
    count: int  # rows in it (known once read, for an adopted one)
    # Some of its rows may be in the database already (another process's, or partly written): each row
    # is written only where the database lacks its request id.
    maybe_written: bool = False


class LedgerJournal:
    def __init__(self, data_dir: Path) -> None:
        """Raises OSError when the directory cannot be made or locked (the ledger then keeps rows in memory)."""
        self.directory = data_dir / JOURNAL_DIRNAME
        create_private_dir(self.directory)
        self.owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        # Held for the life of the process: its kernel lock is what tells other processes it is alive.
        self._owner_lock = os.open(self.directory / f"{self.owner}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._owner_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._serial = 0
        self._adopted: dict[str, tuple[Path, int]] = {}  # dead owners whose segments are being written: lock
        self._current: int | None = None  # descriptor of the segment being appended to
        self._current_path: Path | None = None

    def append(self, values: dict[str, object]) -> Path:
        """Append one row to the current segment (opened on first use); the segment's path.

        Raises OSError (a full disk): the caller keeps the row in memory.
        """
        if self._current is None:
            self._serial += 1
            self._current_path = self.directory / f"{self.owner}-{self._serial}{_SUFFIX}"
            self._current = os.open(self._current_path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
        os.write(self._current, orjson.dumps(values) + b"\n")
        assert self._current_path is not None
        return self._current_path

    def seal(self) -> tuple[Path, int] | None:
        """End the current segment: its path and descriptor (to be fsynced and closed off the event loop,
        `finish_sealing`); None when there is none. The next row starts a new one."""
        if self._current is None or self._current_path is None:
            return None
        sealed = (self._current_path, self._current)
        self._current = self._current_path = None
        return sealed

    @staticmethod
    def finish_sealing(descriptor: int) -> None:
        """Flush a sealed segment to the disk and close it (blocking: in a thread)."""
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    @staticmethod
    def read(path: Path) -> list[dict[str, object]]:
        """A segment's rows; a line cut short by a crash mid-write is skipped (it was never a whole row)."""
        rows = []
        for line in path.read_bytes().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                document = orjson.loads(line)
                if isinstance(document, dict):
                    rows.append(document)
        return rows

    @staticmethod
    def discard(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def orphans(self) -> list[Segment]:
        """The segments of processes that ended (their lock is free), oldest first; each owner's lock is
        taken here and kept until `release_orphans`, so that no other process adopts them too."""
        owners = {path.stem for path in self.directory.glob("*.lock")}
        owners |= {self.owner_of(path) for path in self.directory.glob(f"*{_SUFFIX}")}
        found: list[Segment] = []
        for owner in sorted(owners - {self.owner, *self._adopted}):
            lock_path = self.directory / f"{owner}.lock"
            descriptor = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # alive, or being adopted by another process
                os.close(descriptor)
                continue
            segments = sorted(self.directory.glob(f"{owner}-*{_SUFFIX}"), key=_serial_of)
            if not segments:  # nothing left of it (another process adopted it just before)
                self.discard(lock_path)
                os.close(descriptor)
                continue
            logger.info(f"the usage ledger adopts {len(segments)} journal file(s) of a process that ended ({owner})")
            self._adopted[owner] = (lock_path, descriptor)
            found += [Segment(path, None, 0, maybe_written=True) for path in segments]
        return found

    def release_orphans(self, done: set[str]) -> None:
        """Forget the adopted owners in `done` (their segments all written): their lock files go too."""
        for owner in done:
            lock_path, descriptor = self._adopted.pop(owner)
            self.discard(lock_path)
            os.close(descriptor)

    def adopted_owners(self) -> set[str]:
        return set(self._adopted)

    @staticmethod
    def owner_of(path: Path) -> str:
        return path.stem.rsplit("-", 1)[0]

    def close(self) -> None:
        """At shutdown: seal what is left and give the lock up; segments still there wait for the next start."""
        sealed = self.seal()
        if sealed is not None:
            self.finish_sealing(sealed[1])
        for _lock_path, descriptor in self._adopted.values():
            os.close(descriptor)
        self._adopted.clear()
        if not any(self.directory.glob(f"{self.owner}-*{_SUFFIX}")):
            self.discard(self.directory / f"{self.owner}.lock")
        os.close(self._owner_lock)


def _serial_of(path: Path) -> int:
    try:
        return int(path.stem.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0
