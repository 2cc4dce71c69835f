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


def create_private_file(path: Path) -> None:
    # Create the file ourselves so it is 0600 from the first byte; SQLite gives
    # its -wal and -shm files the same permissions as the database file.
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)
