"""A Redis server of the test's own (`redis-server` on a free loopback port), which it can freeze and thaw.

The shared Redis (Q2API_TEST_REDIS_URL) cannot be stopped by a test: other tests use it. This one is
the test's alone: `freeze()` stops the process (SIGSTOP: connections stay open, nothing is answered,
what clients send waits in the kernel), `thaw()` lets it run on, and it then runs what was sent
meanwhile, as a Redis that paused (a long fork, a stalled disk, a VM frozen) does.

    with redis_server(tmp_path) as redis:
        url = redis.url; redis.freeze(); ...; redis.thaw()

Skips the test when `redis-server` is not installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


class RedisProcess:
    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"

    def freeze(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[RedisProcess]:
    """A fresh `redis-server` (no persistence) with its files in `directory`, stopped at the block's end."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = _free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        yield RedisProcess(process, port)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)  # a frozen process cannot act on SIGTERM
        process.terminate()
        process.wait(timeout=10)
