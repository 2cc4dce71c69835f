"""The gateway's overhead the way the field reports it: p50 / p95 / p99 at fixed request rates, and the most
requests per second per core at which its p99 stays within a bound (issue 33, item 4).

    .venv/bin/python bench/bench_overhead.py                              # 200 KB and 1 MB, SQLite counters
    .venv/bin/python bench/bench_overhead.py --counters redis://127.0.0.1:6379/6
    .venv/bin/python bench/bench_overhead.py --workloads 1mb --rates 2,5,10 --seconds 20 --no-search

LiteLLM publishes its proxy's overhead as p50 / p95 / p99 at a stated request rate against a fake
provider, and a throughput per vCPU. The same here, against the simulated Amazon Q:

- the gateway as deployed (`python -m q2api serve`, one worker: one core), its client holding a
  **store key with every limit set** (rpm, tpm, concurrency, a daily credit budget, all far above the
  load, so none refuses) — each request is admitted against its counters and written to the usage
  ledger, as a team's gateway does; the counters in the store (SQLite, the default) or in Redis
  (`--counters`);
- requests of a Claude Code workload (bench/support/workloads.py: 200 KB, 1 MB) sent open-loop at a
  fixed rate (one every 1/rate s, each on its own connection, whether or not the earlier ones have
  ended), for `--seconds` at each rate, a 5-chunk reply each;
- at the same moments, the same schedule straight to the simulator, with the very body and headers the
  gateway sends upstream (request i of both starts together, so whatever the machine does falls on both
  alike): **request i's overhead = its TTFT through the gateway − its twin's**, and the percentiles are
  those of the overheads;
- the largest rate whose overhead p99 stays <= `--p99-limit` (50 ms) with no error: doubling from the
  first rate, then bisected. One worker uses at most one core (the GIL), so that rate is the
  requests per second per core; the cores the gateway actually used are printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gateway_sections.rig import GATEWAY_HEADERS, SHORT_REPLY_CHUNKS, Rig
from bench.support import machine
from bench.support.client_pool import ClientPool
from bench.support.lean_client import GATEWAY_MARKERS, Target, post_target, wave
from bench.support.proc_stats import ForeignLoad
from bench.support.report import Report, percentile
from bench.support.workloads import WORKLOADS, workload_body

KEY_LIMITS = [
    "--rpm",
    "1000000",
    "--tpm",
    "2000000000",
    "--max-concurrent",
    "100000",
    "--credits-per-day",
    "1000000000",
]


@dataclass(frozen=True)
class RateFigures:
    rate: float
    requests: int
    failed: int
    first_error: str | None
    overhead: dict[float, float]  # percentile -> seconds
    gateway_ttft: dict[float, float]
    alone_ttft: dict[float, float]
    gateway_cores: float
    gateway_cpu_per_request: float  # seconds: the gateway's CPU over the run and its tail, per request
    others: float

    @property
    def ok(self) -> bool:
        return not self.failed


PERCENTILES = (0.5, 0.95, 0.99)


def make_store_key(data_dir: Path, env: dict[str, str], holder: dict[str, str]) -> None:
    """`q2api keys create` in the gateway's data directory, with every limit set; the key goes into `holder`."""
    command = [sys.executable, "-m", "q2api", "keys", "create", "--label", "bench", *KEY_LIMITS]
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("Q2API_", "AMAZONQ_"))}
    answer = subprocess.run(
        command, env={**clean, **env}, cwd=data_dir, capture_output=True, text=True, timeout=120, check=False
    )
    if answer.returncode != 0 or not answer.stdout.strip():
        raise RuntimeError(f"q2api keys create failed: {answer.stderr[-2000:]}")
    holder["key"] = answer.stdout.strip().splitlines()[-1]


async def at_rate(rig: Rig, gateway: Target, alone: Target, rate: float, seconds: float) -> RateFigures:
    """The gateway's schedule (client process) and the simulator-alone one (this process) side by side:
    request i of each starts at the same moment, so whatever the machine does falls on both alike, and
    request i's overhead is the gateway's TTFT less its twin's."""
    assert rig.gateway is not None
    requests = max(20, round(rate * seconds))
    load = ForeignLoad()
    timeout = requests / rate + 60.0
    cpu_before, started = rig.gateway.cpu(), time.monotonic()
    begin = started + 0.3
    through, direct = await asyncio.gather(
        asyncio.to_thread(rig.pool.wave, gateway, requests, 1.0 / rate, 1, timeout, begin),
        wave(alone, requests, 1.0 / rate, 1, begin, timeout=timeout),
    )
    cores = (rig.gateway.cpu() - cpu_before) / max(time.monotonic() - started, 1e-9)
    others, _steal, _ours = load.cores()
    await rig.gateway.settle()
    # Counted once every request has ended (the ledger's rows written): a rate the machine could not keep
    # up with ends late, and its CPU per request must not be divided by a rate it never reached.
    cpu_per_request = (rig.gateway.cpu() - cpu_before) / requests
    pairs = [
        (mine.ttft, twin.ttft)
        for mine, twin in zip(through.results, direct, strict=True)
        if mine.error is None and twin.error is None and mine.ttft is not None and twin.ttft is not None
    ]
    errors = [result.error for result in [*through.results, *direct] if result.error]
    overheads = [mine - twin for mine, twin in pairs]
    return RateFigures(
        rate=rate,
        requests=requests,
        failed=len(errors),
        first_error=errors[0] if errors else None,
        overhead={p: percentile(overheads, p) for p in PERCENTILES},
        gateway_ttft={p: percentile([mine for mine, _ in pairs], p) for p in PERCENTILES},
        alone_ttft={p: percentile([twin for _, twin in pairs], p) for p in PERCENTILES},
        gateway_cores=cores,
        gateway_cpu_per_request=cpu_per_request,
        others=others,
    )


def describe(figures: RateFigures) -> str:
    overhead = " / ".join(f"{figures.overhead[p] * 1000:.1f}" for p in PERCENTILES)
    gateway = " / ".join(f"{figures.gateway_ttft[p] * 1000:.1f}" for p in PERCENTILES)
    alone = " / ".join(f"{figures.alone_ttft[p] * 1000:.1f}" for p in PERCENTILES)
    text = (
        f"{figures.rate:6.1f} req/s: overhead p50/p95/p99 {overhead} ms (gateway TTFT {gateway}, simulator alone "
        f"{alone}); {figures.requests} requests, gateway {figures.gateway_cores:.2f} cores "
        f"({figures.gateway_cpu_per_request * 1000:.1f} ms CPU per request), other processes "
        f"{figures.others:.2f} cores, load {os.getloadavg()[0]:.1f}"
    )
    if figures.failed:
        text += f"; {figures.failed} FAILED: {figures.first_error}"
    return text


async def run(args: argparse.Namespace, pool: ClientPool, report: Report) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="q2api-overhead-"))
    rig = Rig(args, report, scratch, pool)
    key: dict[str, str] = {}
    if args.counters:
        rig.gateway_env["Q2API_REDIS_URL"] = args.counters
    rig.before_gateway = lambda data_dir, env: make_store_key(data_dir, env, key)
    for name in WORKLOADS:
        rig.bodies[name] = workload_body(name)
    try:
        for line in machine.describe():
            print(line)
        process = await rig.use_gateway(1)
        rig.sim.reply(SHORT_REPLY_CHUNKS)
        headers = {**GATEWAY_HEADERS, "x-api-key": key["key"]}
        counters = f"Redis ({args.counters})" if args.counters else "the store (SQLite)"
        for kind in args.workloads:
            report.section(
                f"{kind}. Overhead at fixed rates, {kind} Claude Code body, a store key with every limit set, "
                f"counters in {counters}, the usage ledger on; one worker; {args.seconds:g} s per rate"
            )
            body = rig.bodies[kind]
            gateway = post_target("gateway", "127.0.0.1", process.port, "/v1/messages", headers, body, GATEWAY_MARKERS)
            alone = rig.direct_target(kind)
            tried: dict[float, RateFigures] = {}
            for rate in args.rates:
                tried[rate] = await at_rate(rig, gateway, alone, rate, args.seconds)
                report.row(f"{kind} at {rate:g}/s", describe(tried[rate]))
                report.flush()
            if args.search:
                args.deadline = time.monotonic() + args.search_budget
                best = await _largest_rate(rig, gateway, alone, args, tried)
                if best is None:
                    report.row(f"{kind}: largest rate, p99 <= {args.p99_limit * 1000:g} ms", "none of those tried")
                else:
                    report.row(
                        f"{kind}: largest rate, p99 <= {args.p99_limit * 1000:g} ms",
                        f"{best.rate:.1f} req/s on one worker ({best.gateway_cores:.2f} cores used)",
                    )
            # What the worker's CPU alone allows, whatever the latency: one core over its CPU per request (the
            # median over the rates tried, each counted to the end of its last request).
            per_request = sorted(figures.gateway_cpu_per_request for figures in tried.values())
            cpu_per_request = per_request[len(per_request) // 2]
            report.row(
                f"{kind}: CPU per request (median of {len(per_request)} rates)",
                f"{cpu_per_request * 1000:.1f} ms: at most {1 / cpu_per_request:.0f} req/s per core",
            )
            report.flush()
    finally:
        rig.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _meets(figures: RateFigures, limit: float) -> bool:
    return figures.ok and figures.overhead[0.99] <= limit


async def _largest_rate(
    rig: Rig, gateway: Target, alone: Target, args: argparse.Namespace, tried: dict[float, RateFigures]
) -> RateFigures | None:
    """Doubling from the first rate until one misses, then bisected to 10 %."""
    met = [figures for figures in tried.values() if _meets(figures, args.p99_limit)]
    missed = [figures.rate for figures in tried.values() if not _meets(figures, args.p99_limit)]
    low = max(met, key=lambda figures: figures.rate) if met else None
    high = min((rate for rate in missed if low is None or rate > low.rate), default=None)
    rate: float | None = low.rate * 2 if high is None and low is not None else None
    while time.monotonic() < args.deadline:
        if rate is None:
            if high is None:
                break
            if low is None:
                rate = high / 2  # nothing met yet: halve
            elif high / low.rate <= 1.1:
                break
            else:
                rate = (low.rate + high) / 2
        figures = await at_rate(rig, gateway, alone, rate, args.seconds)
        rig.report.row(f"  search at {rate:.1f}/s", describe(figures))
        rig.report.flush()
        if _meets(figures, args.p99_limit):
            low = figures
            rate = rate * 2 if high is None else None
        else:
            high = rate
            rate = None
            if low is None and high < 1.0:
                break  # not even one request a second
    return low


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="200kb,1mb", help="comma-separated, of bench/support/workloads.py")
    parser.add_argument("--rates", default="2,5,10,20", help="requests per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each rate lasts")
    parser.add_argument("--p99-limit", type=float, default=0.050, help="the overhead p99 the largest rate must keep")
    parser.add_argument("--no-search", dest="search", action="store_false", help="only the rates given")
    parser.add_argument("--search-budget", type=float, default=240.0, help="seconds the search may take per workload")
    parser.add_argument("--counters", help="a Redis URL for the key's counters (default: the store)")
    parser.add_argument("--gateway-command", help="as bench_gateway.py's")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    args.workloads = [name.strip() for name in args.workloads.split(",") if name.strip()]
    args.rates = sorted(float(rate) for rate in args.rates.split(","))
    args.size_kb, args.pin, args.max_connections, args.keep_logs = WORKLOADS["200kb"], False, 20000, False
    args.deadline = float("inf")
    return args


def main() -> None:
    args = parse_args()
    machine.raise_open_file_limit()
    pool = ClientPool(1)
    report = Report()
    started = time.monotonic()
    try:
        uvloop.run(run(args, pool, report))
    finally:
        pool.close()
    report.flush()
    print(f"\n(total {time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
