"""`python -m q2api serve` as a real process (its workers included), for tests of the command line.

with SimulatedUpstream.run_in_thread() as upstream, serve(tmp_path, upstream.env(), workers=2) as server:
    server.get("/healthz"); server.wait_for(lambda line: "POST /v1/messages" in line)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from q2api.settings import ENV_VARIABLES

CLIENT_KEY = "client-key-NEVER-LOGGED-9b1d3f5e7a"


def clean_environment() -> dict[str, str]:
    """The current environment without any q2api / Amazon Q setting a developer may have exported."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ENV_VARIABLES and not key.startswith(("Q2API_", "AMAZONQ_", "PROMETHEUS_"))
    }


class ServeProcess:
    """`python -m q2api serve` on a free port, its stderr collected line by line."""

    def __init__(self, proc: subprocess.Popen[str], workers: int) -> None:
        self.proc = proc
        self.killed = False
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        match = self.wait_for(lambda line: "Uvicorn running on" in line)
        self.base_url = re.search(r"(http://127\.0\.0\.1:\d+)", match).group(1)
        # The port is bound by the parent but only accepts once a worker has started.
        self.wait_until(lambda: sum("Application startup complete" in line for line in self.lines) == workers)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate: Callable[[str], bool]) -> str:
        def first_match() -> str | None:
            return next((line for line in list(self.lines) if predicate(line)), None)

        self.wait_until(lambda: first_match() is not None)
        return first_match()

    def wait_until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError("the expected log line never came; log so far:\n" + "\n".join(self.lines))

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when a machine or a container dies."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.killed = True

    def get(self, path: str) -> tuple[int, dict]:
        status, body = self.get_bytes(path)
        return status, json.loads(body)

    def get_text(self, path: str) -> str:
        return self.get_bytes(path)[1].decode()

    def get_bytes(self, path: str) -> tuple[int, bytes]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
        with opener.open(self.base_url + path, timeout=30) as response:
            return response.status, response.read()


@contextlib.contextmanager
def serve(
    tmp_path: Path,
    upstream_env: dict[str, str],
    *,
    workers: int = 1,
    log_format: str = "text",
    client_key: str = CLIENT_KEY,
    **extra_env: str,
) -> Iterator[ServeProcess]:
    """The gateway on a free port with `client_key` as client key; stopped (SIGTERM) when the block ends."""
    env = {
        **clean_environment(),
        **upstream_env,
        "Q2API_DATA_DIR": str(tmp_path / "data"),
        "Q2API_API_KEYS": client_key,
        "Q2API_LOG_FORMAT": log_format,
        "Q2API_LOG_LEVEL": "INFO",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        **extra_env,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "q2api", "serve", "--port", "0", "--workers", str(workers)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so the workers can be stopped with it
    )
    try:
        server = ServeProcess(proc, workers)
        yield server
        if server.killed:
            return
        proc.terminate()
        # uvicorn re-raises SIGTERM after a graceful shutdown when it runs the app in-process.
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM), "\n".join(server.lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
