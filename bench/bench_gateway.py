"""The running gateway against the simulated Amazon Q upstream on loopback: every target of issue 15.

    .venv/bin/python bench/bench_gateway.py            # everything, about 4 minutes
    .venv/bin/python bench/bench_gateway.py --quick    # everything, fewer runs: about 2 minutes
    .venv/bin/python bench/bench_gateway.py --only burst,thousand [--pin] [--gateway-command "…"]

Three kinds of process: the gateway (`python -m q2api serve [--workers N]`:
uvicorn with uvloop and httptools, as deployed), the simulator
(bench/support/simulator_process.py), and the client — this process for one
request at a time, plus client processes for waves of many streams
(bench/support/client_pool.py), all speaking raw HTTP/1.1 over asyncio
(bench/support/lean_client.py) so that the load generator is not what is
measured; the CPU the client used is printed with every wave (on average, and
in its busiest tenth of a second, beside the gateway's and the machine's). Every stream
opens its own connection, through the gateway and to the simulator alike.

On a shared 2-core machine absolute times mean little, so every latency is
also measured straight against the simulator — the very request bytes the
gateway sent upstream, sent by the same client — and each section says how
many cores other processes used meanwhile and the load average.

Sections (`--only` takes their names), with the targets of issue 15:
  ttft      TTFT added at concurrency 1 (connection opened -> first text read),
            median: tiny request [<= 0.5 ms], ~200 KB Claude Code agent
            request [<= 1.5 ms].
  cpu       Gateway CPU (utime+stime from /proc) per 200-chunk reply: chunks
            back to back [<= 1.0 ms]; chunks 5 ms apart [<= 1.3x the
            simulator's own CPU per reply]. Both figures printed for both.
  burst     100 streams started together, 100 chunks 20 ms apart, one worker:
            TTFT p99 [<= 40 ms], longest gap between text reads p99 [<= 50 ms].
  memory    Worker RSS idle [<= 60 MB]; peak at 100 concurrent 200 KB agent
            streams [<= 150 MB]; growth over 10,000 requests after a warm-up
            [<= 5 MB: flat].
  thousand  1,000 concurrent streams (arriving over 1 s, --ramp), 50 chunks
            100 ms apart, --workers 2: no error, TTFT p99 [<= 250 ms],
            longest-gap p99 [<= 200 ms]; and, for information, the 1,000
            started together.
  max       The largest concurrency still meeting the thousand's targets:
            1000, 1500, 2000, 3000… then bisected (cap, time budget, 2
            waves per level); the first level missed and why, and the
            simulator alone at it.
  workers   The burst and the thousand with --workers 1 and 2 side by side:
            figures for choosing the default.
Every verdict is printed in its section and again in a summary at the end.
No pass/fail exit status: the figures are the report.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop  # a dependency of uvicorn[standard], as deployed

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.gateway_sections import burst, cpu, max_concurrency, memory, thousand, ttft, workers_default
from bench.gateway_sections.rig import Rig
from bench.support import machine, targets
from bench.support.client_pool import ClientPool
from bench.support.report import Report, size

# In the order they run: the one-worker sections first, then those with two workers.
SECTIONS: dict[str, Callable[[Rig], Awaitable[None]]] = {
    "ttft": ttft.run,
    "cpu": cpu.run,
    "burst": burst.run,
    "memory": memory.run,
    "thousand": thousand.run,
    "max": max_concurrency.run,
    "workers": workers_default.run,
}
# What --quick changes: fewer runs and waves, a shorter search (about 2 minutes in all).
QUICK = {
    "runs": 60,
    "warmup": 10,
    "bursts": 2,
    "cpu_requests_back_to_back": 300,
    "cpu_requests_paced": 80,
    "flat_warmup": 500,
    "max_budget": 45.0,
    "max_repeats": 1,
}


def print_header(rig: Rig, pool: ClientPool, sections: list[str]) -> None:
    args = rig.args
    for line in machine.describe():
        print(line)
    print(
        f"processes: simulator pid {rig.sim.pid}, client pid {os.getpid()} + {pool.size} client processes "
        f"{pool.pids()}; " + ("pinned: gateway on CPU 0, simulator and clients on CPU 1" if args.pin else "not pinned")
    )
    print(
        f"gateway: {args.gateway_command or 'python -m q2api'} serve; Q2API_LOG_LEVEL={args.log_level}; "
        f"Q2API_MAX_CONNECTIONS={args.max_connections} per worker (the default follows the open-file limit, "
        f"which may be lower)"
    )
    print(
        f"requests: tiny {size(len(rig.bodies['tiny']))}, agent {size(len(rig.bodies['agent']))}; "
        f"sections: {', '.join(sections)}" + ("; quick" if args.quick else ""),
        flush=True,
    )


async def run(args: argparse.Namespace, pool: ClientPool, report: Report) -> None:
    sections = [name for name in SECTIONS if name in args.only]
    scratch = Path(tempfile.mkdtemp(prefix="q2api-bench-"))
    if args.pin:
        os.sched_setaffinity(0, {1})
    rig = Rig(args, report, scratch, pool)
    try:
        print_header(rig, pool, sections)
        # What exists now lives for the whole run: out of the way of the collector's full passes.
        gc.collect()
        gc.freeze()
        for name in sections:
            print(f"\n[{name}] …", flush=True)
            await SECTIONS[name](rig)
            report.flush()
        cores, streams, processes = rig.busiest_client
        if streams:
            print(
                f"\nThe load generator: at most {cores:.2f} cores over a tenth of a second of a wave ({streams} streams, "
                f"{processes} client process{'es' if processes > 1 else ''}); every wave's figures are printed with it."
            )
    finally:
        rig.stop()
        if args.keep_logs:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs everywhere (about 2 minutes in all)")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument("--pin", action="store_true", help="gateway on CPU 0, simulator and clients on CPU 1")
    parser.add_argument(
        "--gateway-command",
        help="run this instead of `python -m q2api` (it gets `serve --host H --port P [--workers N]`), e.g. a "
        "script that patches a candidate change in and then calls q2api.cli.main.main, to compare before and after",
    )
    parser.add_argument(
        "--log-level", default="WARNING", help="the gateway's Q2API_LOG_LEVEL (INFO logs every request)"
    )
    parser.add_argument("--max-connections", type=int, default=20000, help="the gateway's Q2API_MAX_CONNECTIONS")
    parser.add_argument("--client-processes", type=int, default=2, help="client processes for waves of 500+ streams")
    parser.add_argument("--size-kb", type=int, default=200, help="size of the Claude Code agent request")
    parser.add_argument("--runs", type=int, default=200, help="ttft: runs per request size and target")
    parser.add_argument("--warmup", type=int, default=20, help="ttft: runs not counted")
    parser.add_argument("--cpu-requests-back-to-back", type=int, default=1000, help="cpu: replies measured")
    parser.add_argument("--cpu-requests-paced", type=int, default=200, help="cpu: replies measured (1 s each)")
    parser.add_argument("--cpu-concurrency", type=int, default=20, help="cpu: replies streaming at a time")
    parser.add_argument("--bursts", type=int, default=5, help="burst: waves to the gateway and to the simulator each")
    parser.add_argument("--flat-warmup", type=int, default=1000, help="memory: requests before the first reading")
    parser.add_argument("--flat-requests", type=int, default=10_000, help="memory: requests between the readings")
    parser.add_argument("--flat-concurrency", type=int, default=100, help="memory: requests at a time")
    parser.add_argument(
        "--ramp",
        type=float,
        default=targets.THOUSAND_RAMP,
        help="thousand, max, workers: seconds over which the streams arrive (0: all together)",
    )
    parser.add_argument(
        "--no-herd", dest="herd", action="store_false", help="thousand: skip the 1,000 started together"
    )
    parser.add_argument("--max-budget", type=float, default=300.0, help="max: seconds the search may take")
    parser.add_argument("--max-repeats", type=int, default=2, help="max: waves that must meet the targets per level")
    parser.add_argument("--max-cap", type=int, default=8000, help="max: never more streams than this")
    parser.add_argument("--keep-logs", action="store_true", help="keep the scratch directory with the gateway logs")
    # --quick changes the defaults only: an option given explicitly still wins.
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(**QUICK)
    args = parser.parse_args()
    args.only = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = args.only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {', '.join(sorted(unknown))}; there are {', '.join(SECTIONS)}")
    return args


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    machine.raise_open_file_limit()  # before any child starts: they inherit it
    pool = ClientPool(args.client_processes, cpu=1 if args.pin else None)
    report = Report()
    try:
        uvloop.run(run(args, pool, report))
    finally:
        pool.close()
    report.print_summary()
    print(f"\n(total {time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
