"""The gateway's CPU per request or per reply as instructions counted by callgrind: a figure a shared machine does not move.

    .venv/bin/python bench/count_instructions.py agent [--size-kb 1024] [--requests 4] [--without NAME]
    .venv/bin/python bench/count_instructions.py paced [--chunks 200] [--requests 4] [--without NAME]

Runs the gateway exactly as `bench_gateway.py` does (`q2api serve`, one worker, on the simulated
upstream in a process of its own) but under `valgrind --tool=callgrind` with instrumentation off; once
it has warmed up, instrumentation is switched on (`callgrind_control -i on`) for the measured requests
alone, and the total at exit divided by the requests is the figure:

  agent   a Claude Code request of `--size-kb` (`claude_code_request`), a 5-chunk reply, one at a
          time: what the request costs before and around its first token (the added-TTFT figure's
          CPU). The same body every time, so from the second on it resumes from its own checkpoint,
          as a session's next turn does (bench_gateway.py's ttft section sends it the same way).
  paced   tiny requests, `--chunks` text chunks 25 ms apart, `--requests` at a time (the CPU per
          paced reply; 25 ms rather than 5 so that the slowed-down gateway still reads one chunk at
          a time).

`CALLGRIND_OPTIONS` in the environment adds options to valgrind's (`--separate-threads=yes`: one
count per thread, the event loop's apart from the off-loop worker's).

`--without NAME` runs bench/without.py's gateway with that optimisation turned off, so that
with and without are two counts of one workload. Instructions are not time (a cache miss costs
more than an add), but for the same work on the same interpreter their ratio is the ratio that
matters, and it repeats to a fraction of a percent where wall and CPU time on a busy machine move by
tens of percent. Needs valgrind; takes a minute or two per run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gateway_sections.rig import TINY_REQUEST, gateway_request
from bench.support.lean_client import batch, checked
from bench.support.processes import GatewayProcess, SimulatorProcess
from bench.support.workloads import claude_code_body

_COLLECTED = re.compile(rb"Collected : (\d+)")


async def count(args: argparse.Namespace, scratch: Path) -> int:
    sim = SimulatorProcess(cpu=None)
    # The gateway: bench/without.py's, or another command (a launcher of an earlier checkout, say).
    command = getattr(args, "gateway_command", None)
    gateway_command = (
        [os.path.abspath(part) if Path(part).exists() else part for part in shlex.split(command)]
        if command
        else [sys.executable, str(ROOT / "bench" / "without.py"), args.without]
    )
    launcher = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",  # instrumented only while measured: starts ~4x slower, not ~50x
        *os.environ.get("CALLGRIND_OPTIONS", "").split(),
        f"--callgrind-out-file={scratch / 'callgrind.out'}",
        *gateway_command,
    ]
    gateway = GatewayProcess(sim.env(), scratch / "gateway", "WARNING", cpu=None, launcher=launcher)
    try:
        await gateway.wait_ready(timeout=600)
        if args.workload == "agent":
            sim.reply(5)
            target = gateway_request(gateway.port, claude_code_body(args.size_kb))
            for _ in range(2):
                await checked(target)
        else:
            sim.reply(args.chunks, 0.025)
            target = gateway_request(gateway.port, orjson.dumps(TINY_REQUEST))
            await batch(target, args.requests, args.requests, 1)
        await gateway.settle(timeout=60)
        _instrument(gateway.pid, "on")
        if args.workload == "agent":
            for _ in range(args.requests):
                await checked(target)
        else:
            results = await batch(target, args.requests, args.requests, 1)
            failed = [result.error for result in results if result.error]
            if failed:
                raise RuntimeError(f"{len(failed)} replies failed: {failed[0]}")
        await gateway.settle(timeout=60)  # the end of each request's own work counts too
        _instrument(gateway.pid, "off")
    finally:
        gateway.process.terminate()
        gateway.process.wait(timeout=120)
        sim.process.terminate()
    found = _COLLECTED.findall(gateway.log_path.read_bytes())
    if not found:
        raise RuntimeError(f"no callgrind total in the gateway's log:\n{gateway.log_path.read_text()[-2000:]}")
    return int(found[-1])


def _instrument(pid: int, state: str) -> None:
    answer = subprocess.run(["callgrind_control", "-i", state, str(pid)], check=False, capture_output=True, text=True)
    if "OK." not in answer.stdout:  # it exits 0 whatever happened
        raise RuntimeError(f"callgrind_control -i {state} {pid}: {answer.stdout}{answer.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["agent", "paced"])
    parser.add_argument("--size-kb", type=int, default=1024)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--without", default="nothing", help="a name of bench/without.py (default: nothing)")
    parser.add_argument("--gateway-command", help="run this gateway under callgrind instead of bench/without.py's")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    with tempfile.TemporaryDirectory(prefix="q2api-instructions-") as scratch:
        total = asyncio.run(count(args, Path(scratch)))
    unit = "request" if args.workload == "agent" else f"{args.chunks}-chunk reply"
    print(
        f"{args.workload} without={args.without}: {total / args.requests / 1e6:.2f} M instructions per {unit}"
        + (f" ({total / args.requests / args.chunks / 1e3:.1f} k per chunk)" if args.workload == "paced" else "")
    )


if __name__ == "__main__":
    main()
