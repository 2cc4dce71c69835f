"""The processes the gateway benchmarks measure: the gateway (with its workers) and the simulator.

The gateway runs as `python -m q2api serve` (uvicorn, uvloop, httptools: the
deployed configuration) in a process of its own so that its CPU time and RSS
can be read from /proc (bench/support/proc_stats.py) without the client's or
the simulator's mixed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.support import proc_stats
from q2api.testing.simulated_upstream import SimulatedUpstream

API_KEY = "bench-client-key"
UNCAPPED_INFLIGHT = 1_000_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SimulatorProcess:
    """bench/support/simulator_process.py, steered over its stdin."""

    def __init__(self, cpu: int | None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "support" / "simulator_process.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.pid = self.process.pid
        if cpu is not None:
            os.sched_setaffinity(self.pid, {cpu})
        assert self.process.stdout is not None
        ready = self.process.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError(f"the simulator did not start: {ready!r}")
        self.port = int(ready[1])
        self.url = f"http://127.0.0.1:{self.port}/"

    def env(self) -> dict[str, str]:
        # The variables SimulatedUpstream.env() gives, for this process's port.
        return SimulatedUpstream(port=self.port).env()

    def command(self, name: str, **fields: object) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(orjson.dumps({"cmd": name, **fields}).decode() + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if answer.startswith("ERROR") or not answer:
            raise RuntimeError(f"simulator command {name}: {answer or 'no answer'}")
        return answer

    def reply(self, chunks: int, delay: float = 0.0) -> None:
        """Every request from now on gets `chunks` text frames, `delay` seconds apart."""
        self.command("reply", chunks=chunks, delay=delay)

    @contextlib.contextmanager
    def collector_paused(self) -> Iterator[None]:
        """The simulator's garbage collector off meanwhile: its pauses are not the gateway's."""
        self.command("gc", enabled=False)
        try:
            yield
        finally:
            self.command("gc", enabled=True)

    def cpu(self) -> float:
        return proc_stats.cpu_seconds(self.pid)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.command("quit")
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class GatewayProcess:
    """`python -m q2api serve [--workers N]` on a free port, pointed at the simulator with one account.

    With one worker uvicorn serves in the process it was started as; with more,
    that process only supervises and the workers are its children: CPU time is
    counted over the whole tree, memory worker by worker.
    """

    def __init__(
        self,
        sim_env: dict[str, str],
        data_dir: Path,
        log_level: str,
        cpu: int | None,
        launcher: list[str] | None = None,
        workers: int = 1,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.workers = workers
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {key: value for key, value in os.environ.items() if not key.startswith(("Q2API_", "AMAZONQ_"))}
        env.update(sim_env)
        env.update(
            Q2API_DATA_DIR=str(data_dir),
            Q2API_API_KEYS=API_KEY,
            Q2API_LOG_LEVEL=log_level,
            PYTHONPATH=str(ROOT),
            # One simulated account carries every stream of a benchmark: the per-account cap, which protects
            # a real account from a pile-up, is lifted so the figures are the relay's, not the cap's.
            Q2API_ACCOUNT_MAX_INFLIGHT=str(UNCAPPED_INFLIGHT),
        )
        env.update(extra_env or {})
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = data_dir / "gateway.log"
        self._log = self.log_path.open("wb")
        command = [*(launcher or [sys.executable, "-m", "q2api"]), "serve", "--host", "127.0.0.1"]
        command += ["--port", str(self.port)] + (["--workers", str(workers)] if workers != 1 else [])
        self.process = subprocess.Popen(
            # `launcher` lets an experiment run a patched gateway (a script ending in q2api.cli.main.main).
            command,
            env=env,
            cwd=data_dir,  # so no stray .env file is read
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.process.pid
        if cpu is not None:
            # Set before the workers start, so they inherit it.
            os.sched_setaffinity(self.pid, {cpu})

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until /healthz answers 200 and every worker has started and gone idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            if await self._healthy() and len(self.worker_pids()) == self.workers:
                await self.settle(deadline - time.monotonic())
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the gateway did not start; its log:\n{self.log_path.read_text()[-3000:]}")

    async def _healthy(self) -> bool:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            status_line = await asyncio.wait_for(reader.readline(), 5)
            return status_line.split(b" ")[1:2] == [b"200"]
        except (TimeoutError, OSError):
            return False
        finally:
            writer.close()

    async def settle(self, timeout: float = 10.0, quiet_cpu: float = 0.02, span: float = 0.3) -> None:
        """Until the workers use under `quiet_cpu` s of CPU in `span` s: a worker that answers may still import."""
        deadline = time.monotonic() + max(timeout, span)
        while time.monotonic() < deadline:
            before = self.cpu()
            await asyncio.sleep(span)
            if self.cpu() - before < quiet_cpu:
                return

    def worker_pids(self) -> list[int]:
        """The processes that serve requests: this one alone, or its uvicorn worker children."""
        if self.workers == 1:
            return [self.pid]
        found = []
        for child in proc_stats.children(self.pid):
            with contextlib.suppress(OSError):
                # uvicorn's spawned workers; not multiprocessing's resource tracker, should one start.
                if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(child)
        return found

    def alive(self) -> bool:
        return self.process.poll() is None and len(self.worker_pids()) == self.workers

    def cpu(self) -> float:
        """CPU-seconds of the supervisor and its workers (those that exited included)."""
        return proc_stats.tree_cpu_seconds(self.pid)

    def worker_cpu(self) -> list[float]:
        return [proc_stats.cpu_seconds(pid) for pid in self.worker_pids()]

    def worker_rss_mb(self) -> list[float]:
        return [proc_stats.rss_mb(pid) for pid in self.worker_pids()]

    def rss_mb(self) -> float:
        """The largest worker's VmRSS (with one worker: the gateway's)."""
        return max(self.worker_rss_mb(), default=0.0)

    def hwm_mb(self) -> float:
        return max((proc_stats.hwm_mb(pid) for pid in self.worker_pids()), default=0.0)

    def reset_hwm(self) -> bool:
        return all([proc_stats.reset_hwm(pid) for pid in self.worker_pids()])  # noqa: C419 - every worker's, not up to the first refusal

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def log_problems(self, since: int = 0) -> list[str]:
        """The WARNING, ERROR and CRITICAL lines its log gained after byte `since`."""
        with self.log_path.open("rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        return [line for line in text.splitlines() if any(level in line for level in ("WARNING", "ERROR", "CRITIC"))]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
