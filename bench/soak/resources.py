"""What each gateway process holds, read from /proc: memory, descriptors, and connections by peer.

Sampled through the run (RSS every half second) and compared at its end, once the load has drained:
a leak of memory, files, sockets or pooled connections shows as a difference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from pathlib import Path

from bench.support import proc_stats

DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306}
REDIS_PORT = 6379


def _socket_peers(pid: int) -> dict[str, int]:
    """inode → remote port, for the TCP sockets `pid` holds."""
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    peers: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes and fields[3] == "01":  # ESTABLISHED
                    peers[fields[9]] = int(fields[2].rsplit(":", 1)[1], 16)
    return peers


@dataclasses.dataclass(frozen=True, slots=True)
class Holdings:
    """One process at one moment."""

    rss_mb: float
    descriptors: int
    connections: dict[str, int]  # "database" / "redis" / "upstream" → established sockets to it

    @property
    def other_descriptors(self) -> int:
        """Descriptors that are not pooled connections (files, listening and client sockets, pipes)."""
        return self.descriptors - sum(self.connections.values())


def holdings(pid: int, *, database_port: int | None, upstream_port: int, database_file: str | None) -> Holdings:
    peers = list(_socket_peers(pid).values())
    connections = {
        "upstream": peers.count(upstream_port),
        "redis": peers.count(REDIS_PORT),
        "database": peers.count(database_port) if database_port is not None else 0,
    }
    if database_file is not None:  # SQLite: the descriptors on the file and its -wal / -shm
        connections["database"] = _descriptors_to(pid, database_file)
    return Holdings(proc_stats.rss_mb(pid), proc_stats.open_fds(pid), connections)


def _descriptors_to(pid: int, fragment: str) -> int:
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if fragment in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    count += 1
    return count


class RssSamples:
    """Every process's RSS every `interval` seconds, from a thread: (seconds since start, pid, MB)."""

    def __init__(self, pids: list[int], interval: float = 0.5) -> None:
        self._pids = pids
        self._interval = interval
        self._stop = threading.Event()
        self.samples: list[tuple[float, int, float]] = []
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._pids:
                with contextlib.suppress(OSError, KeyError):
                    self.samples.append((time.monotonic() - self._started, pid, proc_stats.rss_mb(pid)))
            self._stop.wait(self._interval)

    def elapsed(self) -> float:
        """Seconds since sampling began (the time axis of `samples`)."""
        return time.monotonic() - self._started

    def __enter__(self) -> RssSamples:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def growth_after(self, warm_up: float) -> dict[int, tuple[float, float]]:
        """Per pid: its RSS at the end of the warm-up, and its largest RSS after."""
        found: dict[int, tuple[float, float]] = {}
        for pid in self._pids:
            mine = [(at, mb) for at, sample_pid, mb in self.samples if sample_pid == pid]
            warm = [mb for at, mb in mine if at <= warm_up]
            later = [mb for at, mb in mine if at > warm_up]
            if warm and later:
                found[pid] = (warm[-1], max(later))
        return found
