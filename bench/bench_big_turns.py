"""Claude Code's real request sizes against the gateway: every figure of issue 33's items 1-3, one command.

    .venv/bin/python bench/bench_big_turns.py                  # every section, about 12 minutes
    .venv/bin/python bench/bench_big_turns.py --quick          # fewer runs, about 8 minutes
    .venv/bin/python bench/bench_big_turns.py --only ttft,loop [--gateway-command "…"]

The workloads are bench/support/workloads.py's generated Claude Code turns of 200 KB, 1 MB and 2 MB
(the same bytes on every run). The processes, the client and the simulator-alone twins are
bench_gateway.py's (bench/gateway_sections/rig.py): the gateway as deployed (`python -m q2api serve`,
one worker), the simulated Amazon Q in a process of its own, a raw-asyncio client.

Sections (`--only` takes their names), with the targets of issue 33:
  ttft          item 1: TTFT added over the simulator alone for the same upstream body, median
                [1 MB <= 5 ms, 2 MB <= 10 ms]; the gateway's CPU per request (utime + stime), per MB
                [<= 6 ms per MB, at every size] and as a multiple of the simulator's.
  instructions  item 1: the same requests' CPU as instructions counted by callgrind (a figure the
                shared machine does not move), per request and per MB. Needs valgrind.
  loop          item 2: while 1 MB bodies arrive four at a time, a tiny request's TTFT p99 [<= 20 ms]
                and every stream's longest-gap p99 [<= 20 ms], beside the simulator alone.
  memory        item 3: idle RSS [<= 60 MB]; peak RSS at 50 concurrent 1 MB streams [<= 200 MB] and
                at 100 concurrent 2 MB streams [<= 400 MB]; a minute after each [within 10 % of idle].
Every verdict is printed in its section and again in a summary at the end, with the machine's load:
on a shared machine a figure is a measurement, never a pass/fail exit status.
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

import uvloop

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.gateway_sections.rig import Rig
from bench.support import machine
from bench.support.client_pool import ClientPool
from bench.support.report import Report, size
from bench.support.workloads import DIGESTS, WORKLOADS, digest, workload_body
from bench.turn_sections import instructions, loop_hold, memory, ttft

SECTIONS: dict[str, Callable[[Rig], Awaitable[None]]] = {
    "ttft": ttft.run,
    "loop": loop_hold.run,
    "memory": memory.run,
    "instructions": instructions.run,
}
QUICK = {"runs": 20, "warmup": 4, "loop_seconds": 6.0, "callgrind_requests": 2}


async def run(args: argparse.Namespace, pool: ClientPool, report: Report) -> None:
    sections = [name for name in SECTIONS if name in args.only]
    scratch = Path(tempfile.mkdtemp(prefix="q2api-big-turns-"))
    rig = Rig(args, report, scratch, pool)
    rig.gateway_env["LOOP_PROBE_FILE"] = str(scratch / "loop-probe.json")  # read by the loop section
    for name in WORKLOADS:
        rig.bodies[name] = workload_body(name)
    try:
        for line in machine.describe():
            print(line)
        print(
            f"gateway: {args.gateway_command or 'python -m q2api'} serve, one worker; Q2API_LOG_LEVEL={args.log_level}"
        )
        for name in WORKLOADS:
            body = rig.bodies[name]
            same = "as pinned" if digest(body) == DIGESTS[name] else "NOT the pinned bytes: figures not comparable"
            print(f"workload {name}: {size(len(body))}, sha256 {digest(body)[:16]}… ({same})")
        print(f"sections: {', '.join(sections)}" + ("; quick" if args.quick else ""), flush=True)
        gc.collect()
        gc.freeze()
        for name in sections:
            print(f"\n[{name}] …", flush=True)
            await SECTIONS[name](rig)
            report.flush()
    finally:
        rig.stop()
        if args.keep_logs:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs everywhere")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated sections (default: {','.join(SECTIONS)})"
    )
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="ttft and instructions: the sizes measured")
    parser.add_argument(
        "--gateway-command",
        help="run this instead of `python -m q2api` (it gets `serve --host H --port P`): a launcher of another "
        "checkout (bench/launch_checkout.py) or of a patched gateway, to compare before and after",
    )
    parser.add_argument("--log-level", default="WARNING", help="the gateway's Q2API_LOG_LEVEL")
    parser.add_argument("--runs", type=int, default=40, help="ttft: counted runs per workload and target")
    parser.add_argument("--warmup", type=int, default=6, help="ttft: runs not counted")
    parser.add_argument("--callgrind-requests", type=int, default=4, help="instructions: requests counted per size")
    parser.add_argument("--loop-seconds", type=float, default=10.0, help="loop: how long each load lasts")
    parser.add_argument("--loop-rate", type=float, default=20.0, help="loop: tiny requests per second")
    parser.add_argument(
        "--loop-period", type=float, default=1.0, help="loop: seconds between two bursts of 1 MB bodies"
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the scratch directory with the gateway logs")
    if parser.parse_known_args()[0].quick:
        parser.set_defaults(**QUICK)
    args = parser.parse_args()
    args.only = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = args.only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {', '.join(sorted(unknown))}; there are {', '.join(SECTIONS)}")
    args.workloads = [name.strip() for name in args.workloads.split(",") if name.strip()]
    if set(args.workloads) - set(WORKLOADS):
        parser.error(f"workloads are {', '.join(WORKLOADS)}")
    if not args.gateway_command:
        # This checkout's gateway through the launcher that can install the loop section's probe.
        args.gateway_command = f"{sys.executable} {BENCH / 'launch_checkout.py'} {BENCH.parent}"
    # What Rig reads of bench_gateway.py's options.
    args.size_kb, args.pin, args.max_connections = WORKLOADS["200kb"], False, 20000
    return args


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    machine.raise_open_file_limit()
    pool = ClientPool(1)
    report = Report()
    try:
        uvloop.run(run(args, pool, report))
    finally:
        pool.close()
    report.print_summary("Targets of issue 33 (Claude Code's real request sizes)")
    print(f"\n(total {time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
