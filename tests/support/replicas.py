"""`q2api serve` replicas as real child processes: started, awaited until ready, stopped or killed.

Each replica gets a clean environment (no AMAZONQ_* / Q2API_* leaking in from
the developer's shell), its own port and its stderr in a file the test reads.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_environment(extra: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AMAZONQ_", "Q2API_"))}
    env.update(extra)
    return env


class ServeProcess:
    def __init__(self, name: str, env: Mapping[str, str], workdir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{name}.log"
        with open(self.log_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "q2api", "serve", "--port", str(self.port)],
                cwd=workdir,  # no stray .env
                env=dict(env),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until `/readyz` answers 200 (what the Dockerfile's HEALTHCHECK asks too)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited early ({self.process.returncode}): {self.log()}")
            try:
                if httpx2.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not become ready: {self.log()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when a machine or container dies."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
