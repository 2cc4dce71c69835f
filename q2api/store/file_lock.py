"""Exclusive fcntl locks on files in the data directory, shared by every `--workers` process."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

POLL_INTERVAL = 0.02  # seconds between attempts of the async lock


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Blocks until the lock is ours: for start-up, where waiting a moment for another worker is right."""
    with _lock_file(path) as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield


@contextlib.asynccontextmanager
async def exclusive_lock_async(path: Path) -> AsyncIterator[None]:
    """Polls for the lock, so that waiting never blocks the event loop or a thread."""
    with _lock_file(path) as fd:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(POLL_INTERVAL)
        yield


@contextlib.contextmanager
def _lock_file(path: Path) -> Iterator[int]:
    # Closing the descriptor releases a lock held on it, however the block ends.
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)
