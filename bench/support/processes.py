"""The processes bench_gateway.py measures: the gateway, the simulator, and what /proc says about them.

The gateway runs as `python -m q2api serve` (uvicorn, uvloop, httptools: the
deployed configuration) in a process of its own so that its CPU time and RSS
can be read from /proc without the client's or the simulator's mixed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from q2api.testing.simulated_upstream import SimulatedUpstream

API_KEY = "bench-client-key"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a whole process (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of proc(5)


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


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

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.command("quit")
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class GatewayProcess:
    """`python -m q2api serve` on a free port, pointed at the simulator with one account."""

    def __init__(
        self,
        sim_env: dict[str, str],
        data_dir: Path,
        log_level: str,
        cpu: int | None,
        launcher: list[str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {key: value for key, value in os.environ.items() if not key.startswith(("Q2API_", "AMAZONQ_"))}
        env.update(sim_env)
        env.update(
            Q2API_DATA_DIR=str(data_dir), Q2API_API_KEYS=API_KEY, Q2API_LOG_LEVEL=log_level, PYTHONPATH=str(ROOT)
        )
        self.log_path = data_dir / "gateway.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            # `launcher` lets an experiment run a patched gateway (a script ending in q2api.cli.main.main).
            [*(launcher or [sys.executable, "-m", "q2api"]), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            cwd=data_dir,  # so no stray .env file is read
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.process.pid
        if cpu is not None:
            os.sched_setaffinity(self.pid, {cpu})

    async def wait_ready(self, session: aiohttp.ClientSession, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(self.base_url + "/healthz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the gateway did not start; its log:\n{self.log_path.read_text()[-3000:]}")

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mb(self) -> float:
        return status_kb(self.pid, "VmRSS") / 1024

    def hwm_mb(self) -> float:
        return status_kb(self.pid, "VmHWM") / 1024

    def reset_hwm(self) -> bool:
        """Set VmHWM back to the current RSS (proc(5), clear_refs value 5)."""
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            return True
        except OSError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


class RssSampler:
    """The gateway's VmRSS every `interval` seconds, from a thread; keeps the maximum."""

    def __init__(self, gateway: GatewayProcess, interval: float = 0.01) -> None:
        self._gateway = gateway
        self._interval = interval
        self._stop = threading.Event()
        self.peak_mb = 0.0
        self.samples = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self._gateway.rss_mb())
            self.samples += 1
            self._stop.wait(self._interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, steal) CPU-seconds of the whole machine so far, from /proc/stat."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq) / CLOCK_TICKS, steal / CLOCK_TICKS


class ForeignLoad:
    """How many cores processes other than ours used over a span: the noise on a shared machine."""

    def __init__(self, pids: list[int]) -> None:
        self._pids = pids
        self._start = self._snapshot()

    def _snapshot(self) -> tuple[float, float, float, float]:
        busy, steal = machine_busy_seconds()
        ours = sum(cpu_seconds(pid) for pid in self._pids)
        return time.monotonic(), busy, steal, ours

    def restart(self) -> None:
        self._start = self._snapshot()

    def cores(self) -> tuple[float, float]:
        """(cores used by other processes, cores stolen by the hypervisor) since the start."""
        now = self._snapshot()
        wall = max(now[0] - self._start[0], 1e-9)
        foreign = (now[1] - self._start[1]) - (now[3] - self._start[3])
        return max(foreign, 0.0) / wall, (now[2] - self._start[2]) / wall
