"""What every section of bench_gateway.py shares: the simulator, the client processes, the gateway of the moment.

One gateway runs at a time. A section asks for one with so many workers; if
the running one has another count it is stopped and a fresh one started,
warmed up (each worker fetches its access token on its first request) and its
idle memory read. The simulator-alone targets are built once, from the bytes
the first gateway sent upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import os
import shlex
from collections.abc import Callable
from pathlib import Path

import orjson

from bench.support.client_pool import ClientPool, WaveOutcome
from bench.support.lean_client import GATEWAY_MARKERS, UPSTREAM_MARKERS, Target, batch, checked, post_target
from bench.support.proc_stats import ForeignLoad, PeakRate, RssSampler, cpu_seconds, machine_busy_seconds
from bench.support.processes import API_KEY, GatewayProcess, SimulatorProcess
from bench.support.report import Report, size
from bench.support.wave_summary import WaveSummary
from bench.support.workloads import claude_code_body

TINY_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8192,  # room for every chunk of the longest reply here, so none is cut short
    "stream": True,
    "messages": [{"role": "user", "content": "Say hello in five words."}],
}
GATEWAY_HEADERS = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
# The request headers the gateway sends upstream, which a direct call repeats.
UPSTREAM_HEADERS = ("Content-Type", "X-Amz-Target", "x-amzn-codewhisperer-optout", "User-Agent", "Authorization")
# The reply every warm-up and concurrency-1 request gets: a few chunks, back to back.
SHORT_REPLY_CHUNKS = 5


def gateway_request(port: int, body: bytes) -> Target:
    """A POST /v1/messages of `body` to the gateway on `port`, with the benchmark's API key."""
    return post_target("gateway", "127.0.0.1", port, "/v1/messages", GATEWAY_HEADERS, body, GATEWAY_MARKERS)


@dataclasses.dataclass(frozen=True)
class WaveRecord:
    """One wave and what every process on the machine spent on it."""

    summary: WaveSummary
    outcome: WaveOutcome
    through_gateway: bool
    gateway_cores: float
    simulator_cores: float
    client_cores: float
    other_cores: float
    peak_worker_rss_mb: float
    peaks: dict[
        str, float
    ]  # the most cores used over a tenth of a second (CPU ticks are 10 ms): "gateway", "client", "machine"

    def cores_text(self) -> str:
        gateway = f"gateway {self.gateway_cores:.2f}, " if self.through_gateway else ""
        return (
            f"cores used: {gateway}simulator {self.simulator_cores:.2f}, "
            f"client {self.client_cores:.2f} ({self.outcome.processes} process"
            f"{'es' if self.outcome.processes > 1 else ''}), other processes {self.other_cores:.2f}; "
            f"wave {self.outcome.wall:.1f} s; busiest tenth of a second: "
            + (f"gateway {self.peaks.get('gateway', 0.0):.2f} cores, " if self.through_gateway else "")
            + f"client {self.peaks.get('client', 0.0):.2f}, whole machine {self.peaks.get('machine', 0.0):.2f} "
            + f"of {os.cpu_count()}"
        )


class Rig:
    def __init__(self, args: argparse.Namespace, report: Report, scratch: Path, pool: ClientPool) -> None:
        self.args = args
        self.report = report
        self.scratch = scratch
        self.pool = pool
        self.sim = SimulatorProcess(cpu=1 if args.pin else None)
        self.gateway: GatewayProcess | None = None
        self._gateways_started = 0
        self.started_rss: dict[int, list[float]] = {}  # workers -> each worker's RSS just after start-up
        self.idle_rss: dict[int, list[float]] = {}  # workers -> each worker's RSS after warm-up, idle
        self.waves: dict[tuple[str, int], WaveRecord] = {}  # (wave name, workers) -> the record
        # The most CPU the client processes used over a tenth of a second of any wave: (cores, streams, processes).
        self.busiest_client = (0.0, 0, 0)
        self.bodies = {
            "tiny": orjson.dumps(TINY_REQUEST),
            "agent": claude_code_body(args.size_kb),
        }
        self._twins: dict[str, Target] = {}
        # What a benchmark adds to the gateway's environment, and runs in its data directory (with that
        # environment) before the gateway starts: e.g. a store key made with `q2api keys create`.
        self.gateway_env: dict[str, str] = {}
        self.before_gateway: Callable[[Path, dict[str, str]], None] | None = None
        self._launcher = None
        if args.gateway_command:
            # The gateway runs in a scratch directory: make relative paths that exist here absolute.
            self._launcher = [
                os.path.abspath(part) if Path(part).exists() else part for part in shlex.split(args.gateway_command)
            ]

    @property
    def agent_label(self) -> str:
        return f"{size(len(self.bodies['agent']))} agent"

    # -- the gateway ----------------------------------------------------------

    async def use_gateway(self, workers: int) -> GatewayProcess:
        """A running, warmed-up gateway with `workers` workers (the one running if it fits)."""
        if self.gateway is not None and self.gateway.workers == workers and self.gateway.alive():
            return self.gateway
        self.stop_gateway()
        self._gateways_started += 1
        print(f"  (starting the gateway with --workers {workers})", flush=True)
        data_dir = self.scratch / f"gateway-{self._gateways_started}-w{workers}"
        extra_env = {"Q2API_MAX_CONNECTIONS": str(self.args.max_connections), **self.gateway_env}
        if self.before_gateway is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            self.before_gateway(data_dir, {**self.sim.env(), "Q2API_DATA_DIR": str(data_dir), **extra_env})
        gateway = GatewayProcess(
            self.sim.env(),
            data_dir,
            self.args.log_level,
            cpu=0 if self.args.pin else None,
            launcher=self._launcher,
            workers=workers,
            extra_env=extra_env,
        )
        self.gateway = gateway
        await gateway.wait_ready()
        self.started_rss[workers] = gateway.worker_rss_mb()
        self.sim.reply(SHORT_REPLY_CHUNKS)
        tiny = self.gateway_target("tiny")
        for _ in range(3):
            # Several at a time, so that every worker gets some (and fetches its access token).
            for result in await batch(tiny, 8 * workers, 4 * workers, 1):
                if result.error:
                    raise RuntimeError(f"a warm-up request failed: {result.error}")
        await gateway.settle()
        await asyncio.sleep(0.5)
        self.idle_rss[workers] = gateway.worker_rss_mb()
        if not self._twins:
            for kind in self.bodies:
                self._twins[kind] = await self._direct_twin(self.gateway_target(kind))
        return gateway

    def stop_gateway(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
            if self.args.keep_logs:
                print(f"  (gateway log kept: {self.gateway.log_path})")
            self.gateway = None

    def gateway_target(self, kind: str) -> Target:
        assert self.gateway is not None
        return gateway_request(self.gateway.port, self.bodies[kind])

    def direct_target(self, kind: str) -> Target:
        """The simulator-alone twin of a gateway request: the very bytes and headers the gateway sent upstream."""
        return self._twins[kind]

    async def _direct_twin(self, gateway: Target) -> Target:
        await checked(gateway)
        capture = self.scratch / "captured.json"
        self.sim.command("capture", path=str(capture))
        captured = orjson.loads(capture.read_bytes())
        headers = {key: value for key, value in captured["headers"].items() if key in UPSTREAM_HEADERS}
        body = base64.b64decode(captured["body"])
        return post_target("simulator", "127.0.0.1", self.sim.port, "/", headers, body, UPSTREAM_MARKERS)

    # -- waves ------------------------------------------------------------------

    async def wave(self, target: Target, streams: int, chunks: int, delay: float, ramp: float = 0.0) -> WaveRecord:
        """`streams` streams, each a reply of `chunks` text chunks `delay` s apart.

        Started together, or (`ramp` > 0) one after another at even intervals over `ramp` seconds.
        """
        assert self.gateway is not None
        gateway = self.gateway
        self.sim.reply(chunks, delay)
        load = ForeignLoad()
        gateway_before, sim_before = gateway.cpu(), self.sim.cpu()
        timeout = chunks * delay + ramp + 60.0
        # The gateway may merge frames that arrive in one read into one delta: it owes at least one;
        # the simulator alone owes every frame.
        expected = 1 if target.name == "gateway" else chunks
        counters = {
            "machine": lambda: machine_busy_seconds()[0],
            "client": lambda: sum(cpu_seconds(pid) for pid in self.pool.pids()),
        }
        if target.name == "gateway":
            counters["gateway"] = gateway.cpu
        with (
            RssSampler(gateway.worker_pids, interval=0.05) as sampler,
            PeakRate(counters) as peaks,
            self.sim.collector_paused(),
        ):
            outcome = await asyncio.to_thread(self.pool.wave, target, streams, ramp / streams, expected, timeout)
        others, _steal, _ours = load.cores()
        wall = max(outcome.wall, 1e-9)
        through_gateway = target.name == "gateway"
        record = WaveRecord(
            summary=WaveSummary.of(outcome.results),
            outcome=outcome,
            through_gateway=through_gateway,
            gateway_cores=(gateway.cpu() - gateway_before) / wall if through_gateway else 0.0,
            simulator_cores=(self.sim.cpu() - sim_before) / wall,
            client_cores=outcome.client_cpu / wall,
            other_cores=others,
            peak_worker_rss_mb=sampler.peak_mb,
            peaks=peaks.peaks,
        )
        await gateway.settle()  # the streams' ends (closing, logging) before the next measurement
        if record.peaks.get("client", 0.0) > self.busiest_client[0]:
            self.busiest_client = (record.peaks["client"], streams, outcome.processes)
        return record

    def stop(self) -> None:
        self.stop_gateway()
        self.sim.stop()
