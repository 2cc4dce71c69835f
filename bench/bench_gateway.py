"""The running gateway against the simulated Amazon Q upstream on loopback: latency, CPU, memory.

    .venv/bin/python bench/bench_gateway.py [--quick] [--pin] [--runs 200] [--log-level WARNING]

Three processes: the gateway (`python -m q2api serve`: uvicorn with uvloop and
httptools, as deployed), the simulator (bench/support/simulator_process.py) and this
one, the client (raw aiohttp; the `anthropic` SDK would itself be the
bottleneck at 100 streams). `--pin` puts the gateway on CPU 0 and the
simulator and client on CPU 1; by default the kernel schedules all three on
the machine's cores.

On a shared 2-core machine absolute times mean little, so every latency is
also measured straight against the simulator — the very request bytes the
gateway sent upstream, POSTed by the same client, timed to the first text
frame — and the gateway's figure is what it adds to that. Each section also
says how many cores other processes used meanwhile.

Measures, with the targets:
  1. TTFT added at concurrency 1 (request sent -> first text delta read), median
     and p90: a tiny request [<= 1 ms], a ~200 KB Claude Code request [<= 3 ms].
  2. Gateway CPU per request (utime+stime from /proc/<pid>/stat over N requests)
     for a 200-chunk streamed reply [<= 3 ms]; chunks paced so each is its own
     upstream read (the realistic case), and back to back (reads batch).
  3. 100 concurrent streams of 100 chunks 20 ms apart: all started at once
     ("burst") and arriving steadily so that 100 are always open ("steady"):
     TTFT p50/p99 [p99 <= 50 ms] and each stream's longest gap between two
     text deltas, p99 over the streams [<= 60 ms].
  4. Gateway RSS idle after start-up and one request [<= 60 MB], and its peak
     during 100 concurrent ~200 KB-request streams [<= 150 MB] (VmRSS every
     10 ms, and VmHWM after resetting it).
No pass/fail exit status: the targets are printed next to the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.support.gateway_client import (
    StreamResult,
    Target,
    checked,
    direct_twin,
    gateway_target,
    wave,
)
from bench.support.processes import ForeignLoad, GatewayProcess, RssSampler, SimulatorProcess
from q2api.testing.claude_code_request import claude_code_request

TINY_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8192,  # room for every chunk of the longest reply here, so none is cut short
    "stream": True,
    "messages": [{"role": "user", "content": "Say hello in five words."}],
}


# ----------------------------------------------------------------------------- output


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


def verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else "MISSED"


class Table:
    """Rows of label | figure | target, grouped in sections, with free-text notes."""

    def __init__(self) -> None:
        self._rows: list[tuple[str, str, str]] = []

    def section(self, title: str) -> None:
        self._rows.append(("\n" + title, "", ""))

    def row(self, label: str, figure: str, target: str = "") -> None:
        self._rows.append((label, figure, target))

    def note(self, text: str) -> None:
        self._rows.append(("", text, ""))

    def print(self) -> None:
        measured = [(label, figure) for label, figure, _ in self._rows if label and not label.startswith("\n")]
        label_width = max(len(label) for label, _ in measured)
        figure_width = max(len(figure) for _, figure in measured)
        for label, figure, target in self._rows:
            if label.startswith("\n"):
                print(label)
            elif not label:
                print(f"    {'':<{label_width}}  ({figure})")
            else:
                print(f"    {label:<{label_width}}  {figure:<{figure_width}}  {target}".rstrip())


def note_foreign_load(table: Table, load: ForeignLoad) -> None:
    others, steal = load.cores()
    text = f"meanwhile other processes on this machine used {others:.2f} cores"
    if steal >= 0.01:
        text += f", the hypervisor stole {steal:.2f}"
    table.note(text)


# ----------------------------------------------------------------------------- 1. TTFT


async def measure_ttft(
    session: aiohttp.ClientSession, pairs: dict[str, tuple[Target, Target]], runs: int, warmup: int, table: Table
) -> None:
    for (kind, (gateway, direct)), limit in zip(pairs.items(), (0.001, 0.003), strict=False):
        # One request size at a time (the garbage of 200 KB requests would otherwise slow
        # the tiny ones down), gateway and simulator interleaved in alternating order so
        # machine noise falls on both alike.
        through: list[float] = []
        alone: list[float] = []
        for index in range(warmup + runs):
            for target in (gateway, direct) if index % 2 else (direct, gateway):
                result = await checked(session, target)
                if index >= warmup:
                    (through if target is gateway else alone).append(result.ttft or 0.0)
        added_median = statistics.median(through) - statistics.median(alone)
        added_p90 = percentile(through, 0.9) - percentile(alone, 0.9)
        table.row(
            f"{kind}: simulator alone", f"median {ms(statistics.median(alone))}   p90 {ms(percentile(alone, 0.9))}"
        )
        table.row(
            f"{kind}: through the gateway",
            f"median {ms(statistics.median(through))}   p90 {ms(percentile(through, 0.9))}",
        )
        table.row(
            f"{kind}: added by the gateway",
            f"median {ms(added_median)}   p90 {ms(added_p90)}",
            f"[target <= {limit * 1000:g} ms added: {verdict(added_median, limit)}]",
        )


# ----------------------------------------------------------------------------- 2. CPU


async def measure_cpu(
    session: aiohttp.ClientSession,
    sim: SimulatorProcess,
    gateway: GatewayProcess,
    target: Target,
    label: str,
    requests: int,
    concurrency: int,
    chunks: int,
    delay: float,
    table: Table,
    target_note: str,
) -> None:
    sim.reply(chunks, delay)
    for _ in range(3):
        await checked(session, target)
    gate = asyncio.Semaphore(concurrency)

    async def one() -> StreamResult:
        async with gate:
            return await checked(session, target)

    await asyncio.sleep(0.05)
    gateway_before, sim_before, client_before = gateway.cpu(), sim.cpu(), time.process_time()
    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(requests)))
    elapsed = time.perf_counter() - started
    await asyncio.sleep(0.05)  # the gateway's own end-of-request work (log line, cleanup) counts too
    gateway_cpu = (gateway.cpu() - gateway_before) / requests
    sim_cpu = (sim.cpu() - sim_before) / requests
    client_cpu = (time.process_time() - client_before) / requests
    table.row(
        label,
        f"{ms(gateway_cpu)}/req = {gateway_cpu / chunks * 1e6:5.1f} µs/chunk",
        target_note.format(verdict=verdict(gateway_cpu, 0.003)),
    )
    deltas = statistics.mean(result.texts for result in results)
    table.note(
        f"simulator {sim_cpu * 1000:.2f} ms/req, client {client_cpu * 1000:.2f} ms/req; {requests} requests, "
        f"{concurrency} at a time, in {elapsed:.1f} s; {deltas:.0f} text deltas per reply"
    )


# ----------------------------------------------------------------------------- 3. concurrency


def summarise_streams(label: str, results: list[StreamResult], table: Table, targets: bool) -> None:
    failed = [result for result in results if result.error]
    good = [result for result in results if not result.error and result.ttft is not None]
    if not good:
        table.row(label, f"all {len(results)} streams failed: {failed[0].error if failed else '?'}")
        return
    ttfts = [result.ttft for result in good if result.ttft is not None]
    gaps = [result.max_gap for result in good]
    ttft_p99, gap_p99 = percentile(ttfts, 0.99), percentile(gaps, 0.99)
    table.row(
        f"{label}: TTFT",
        f"p50 {ms(percentile(ttfts, 0.5))}   p99 {ms(ttft_p99)}   max {ms(max(ttfts))}",
        f"[target p99 <= 50 ms: {verdict(ttft_p99, 0.050)}]" if targets else "",
    )
    table.row(
        f"{label}: longest gap per stream",
        f"p50 {ms(percentile(gaps, 0.5))}   p99 {ms(gap_p99)}   max {ms(max(gaps))}",
        f"[target p99 <= 60 ms: {verdict(gap_p99, 0.060)}]" if targets else "",
    )
    texts = statistics.mean(result.texts for result in good)
    text = f"{len(good)} streams, {texts:.0f} texts each"
    if failed:
        text += f"; {len(failed)} FAILED: {failed[0].error}"
    table.note(text)


async def measure_concurrency(
    session: aiohttp.ClientSession,
    sim: SimulatorProcess,
    pair: tuple[Target, Target],
    args: argparse.Namespace,
    table: Table,
) -> None:
    sim.reply(args.stream_chunks, args.stream_delay)
    duration = args.stream_chunks * args.stream_delay
    for target in reversed(pair):  # the simulator alone first: the floor
        is_gateway = target.name == "gateway"
        results: list[StreamResult] = []
        for _ in range(args.bursts):
            results += await wave(session, target, args.streams, 0.0)
            await asyncio.sleep(0.3)
        summarise_streams(f"{target.name}, burst", results, table, is_gateway)
        if args.steady_windows:
            # One arrival every duration/streams seconds keeps `streams` replies open once
            # the first reply duration has passed; only streams that started after that,
            # and early enough to end before arrivals stop, are counted.
            total = args.streams * (args.steady_windows + 2)
            results = await wave(session, target, total, duration / args.streams)
            steady = [r for r in results if duration <= r.started < duration * (args.steady_windows + 1)]
            summarise_streams(f"{target.name}, steady", steady, table, is_gateway)
            await asyncio.sleep(0.3)


# ----------------------------------------------------------------------------- 4. memory


async def measure_peak_memory(
    session: aiohttp.ClientSession,
    sim: SimulatorProcess,
    gateway: GatewayProcess,
    target: Target,
    label: str,
    args: argparse.Namespace,
    table: Table,
    limit: float | None,
) -> None:
    sim.reply(args.stream_chunks, args.stream_delay)
    before = gateway.rss_mb()
    hwm_reset = gateway.reset_hwm()
    with RssSampler(gateway) as sampler:
        results = await wave(session, target, args.streams, 0.0)
        await asyncio.sleep(0.05)
    hwm = gateway.hwm_mb()
    peak = max(sampler.peak_mb, hwm) if hwm_reset else sampler.peak_mb
    await asyncio.sleep(1.0)
    table.row(
        f"peak during {args.streams} concurrent {label} streams",
        f"{peak:6.1f} MB",
        f"[target <= {limit:g} MB: {verdict(peak, limit)}]" if limit else "",
    )
    failed = sum(1 for result in results if result.error)
    table.note(
        f"VmRSS sampled {sampler.samples}x, max {sampler.peak_mb:.1f} MB; "
        + (f"VmHWM {hwm:.1f} MB; " if hwm_reset else "VmHWM not resettable; ")
        + f"RSS {before:.1f} MB before, {gateway.rss_mb():.1f} MB 1 s after"
        + (f"; {failed} streams FAILED" if failed else "")
    )


# ----------------------------------------------------------------------------- main


async def run(args: argparse.Namespace, table: Table) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="q2api-bench-"))
    if args.pin:
        os.sched_setaffinity(0, {1})
    sim = SimulatorProcess(cpu=1 if args.pin else None)
    launcher = None
    if args.gateway_command:
        # The gateway runs in a scratch directory: make relative paths that exist here absolute.
        launcher = [
            os.path.abspath(part) if Path(part).exists() else part for part in shlex.split(args.gateway_command)
        ]
    gateway = GatewayProcess(sim.env(), scratch, args.log_level, cpu=0 if args.pin else None, launcher=launcher)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=120))
    try:
        await gateway.wait_ready(session)
        started_rss = gateway.rss_mb()
        tiny = gateway_target(gateway.base_url, orjson.dumps(TINY_REQUEST))
        big = gateway_target(gateway.base_url, orjson.dumps(claude_code_request(size_kb=args.size_kb)))
        sim.reply(5)
        await checked(session, tiny)  # the first request also fetches the access token
        await asyncio.sleep(0.5)
        idle_rss = gateway.rss_mb()
        tiny_direct = await direct_twin(session, sim, tiny, scratch)
        big_direct = await direct_twin(session, sim, big, scratch)
        load = ForeignLoad([gateway.pid, sim.pid, os.getpid()])
        print(
            f"gateway pid {gateway.pid}, simulator pid {sim.pid}, client pid {os.getpid()} "
            + ("(pinned: gateway on CPU 0, simulator and client on CPU 1)" if args.pin else "(not pinned)")
            + f"; {os.cpu_count()} CPUs; Python {platform.python_version()}; gateway log level {args.log_level}"
            + (f"; gateway command: {args.gateway_command}" if args.gateway_command else "")
        )
        print(
            f"tiny request {len(tiny.body)} B ({len(tiny_direct.body)} B upstream); Claude Code request "
            f"{len(big.body) // 1024} KB ({len(big_direct.body) // 1024} KB upstream)",
            flush=True,
        )

        print("1. TTFT ...", flush=True)
        table.section(f"1. TTFT at concurrency 1: request sent -> first text delta read ({args.runs} runs each)")
        load.restart()
        pairs = {"tiny": (tiny, tiny_direct), f"{len(big.body) // 1024} KB": (big, big_direct)}
        await measure_ttft(session, pairs, args.runs, args.warmup, table)
        note_foreign_load(table, load)

        print("2. CPU ...", flush=True)
        table.section(f"2. Gateway CPU per request, {args.cpu_chunks}-chunk streamed reply (/proc utime+stime)")
        load.restart()
        paced = f"chunks {args.cpu_delay * 1000:g} ms apart"
        common = (args.cpu_requests, args.cpu_concurrency, args.cpu_chunks)
        await measure_cpu(
            session, sim, gateway, tiny, f"tiny, {paced}", *common, args.cpu_delay, table, "[target <= 3 ms: {verdict}]"
        )
        await measure_cpu(
            session,
            sim,
            gateway,
            tiny,
            "tiny, chunks back to back",
            *common,
            0.0,
            table,
            "(reads batch several frames)",
        )
        await measure_cpu(
            session,
            sim,
            gateway,
            big,
            f"{len(big.body) // 1024} KB request, {paced}",
            max(args.cpu_requests // 4, 10),
            args.cpu_concurrency,
            args.cpu_chunks,
            args.cpu_delay,
            table,
            "(+ parse and convert)",
        )
        note_foreign_load(table, load)

        print("3. concurrency ...", flush=True)
        table.section(
            f"3. {args.streams} concurrent streams of {args.stream_chunks} chunks {args.stream_delay * 1000:g} ms "
            f"apart, tiny requests ({args.bursts} bursts; steady state over {args.steady_windows} reply durations)"
        )
        load.restart()
        await measure_concurrency(session, sim, (tiny, tiny_direct), args, table)
        note_foreign_load(table, load)

        print("4. memory ...", flush=True)
        table.section("4. Gateway memory (RSS)")
        load.restart()
        table.row(
            "idle after start-up + one request", f"{idle_rss:6.1f} MB", f"[target <= 60 MB: {verdict(idle_rss, 60)}]"
        )
        table.note(f"just after start-up {started_rss:.1f} MB")
        await measure_peak_memory(session, sim, gateway, tiny, "tiny-request", args, table, None)
        await measure_peak_memory(session, sim, gateway, big, f"{len(big.body) // 1024} KB-request", args, table, 150)
        note_foreign_load(table, load)
    finally:
        await session.close()
        gateway.stop()
        sim.stop()
        if args.keep_logs:
            print(f"gateway log kept: {gateway.log_path}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs everywhere (about 45 s instead of 2 min)")
    parser.add_argument("--pin", action="store_true", help="gateway on CPU 0, simulator and client on CPU 1")
    parser.add_argument(
        "--log-level", default="WARNING", help="the gateway's Q2API_LOG_LEVEL (INFO logs every request)"
    )
    parser.add_argument("--size-kb", type=int, default=200, help="size of the Claude Code-like request")
    parser.add_argument("--runs", type=int, default=200, help="TTFT runs per variant")
    parser.add_argument("--warmup", type=int, default=20, help="TTFT runs per variant not counted")
    parser.add_argument("--cpu-requests", type=int, default=200)
    parser.add_argument("--cpu-concurrency", type=int, default=20)
    parser.add_argument("--cpu-chunks", type=int, default=200)
    parser.add_argument("--cpu-delay", type=float, default=0.005, help="seconds between reply chunks")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--stream-chunks", type=int, default=100)
    parser.add_argument("--stream-delay", type=float, default=0.02, help="seconds between reply chunks")
    parser.add_argument("--bursts", type=int, default=3, help="all-at-once waves per target")
    parser.add_argument(
        "--steady-windows", type=int, default=2, help="reply durations measured in steady state (0: skip)"
    )
    parser.add_argument(
        "--gateway-command",
        help="run this instead of `python -m q2api` (it gets `serve --host H --port P`), e.g. a script that "
        "patches a candidate fix in and then calls q2api.cli.main.main, to compare before and after",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the scratch directory with the gateway's log")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.warmup, args.cpu_requests, args.bursts, args.steady_windows = 60, 10, 80, 1, 1
    return args


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    table = Table()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        asyncio.run(run(args, table))
    else:
        uvloop.run(run(args, table))
    table.print()
    print(f"\n(total {time.perf_counter() - started:.0f} s; load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
