"""Files and directories only their owner can read: the store holds tokens."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def create_private_dir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        # Already there: the operator's own directory, or another `--workers`
        # process won the race to create it. Tokens live here: no access for others.
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode) and mode & 0o077:
            os.chmod(path, stat.S_IMODE(mode) & 0o700)
        return
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask


def create_private_file(path: Path) -> bool:
    """Create `path`, empty and 0600, unless it exists; whether it was created here.

    A file already there is never opened (O_EXCL fails without a descriptor): it may be a live
    database, and closing any descriptor of it would drop the POSIX locks its connections in this
    process hold. Created here, it is new, so nothing of this process holds a lock on it yet.
    SQLite gives a database's -wal and -shm files the database's own permissions.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, 0o600)  # the umask may have taken the owner's bits off the mode asked for
    finally:
        os.close(fd)
    return True
