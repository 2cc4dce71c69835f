"""Where the running gateway spends its time: py-spy samples of one workload, as top-N tables.

    .venv/bin/pip install py-spy     # once; a profiler, not a dependency of q2api
    .venv/bin/python bench/profile_gateway.py paced      [--seconds 15] [--top 25] [--native]
    .venv/bin/python bench/profile_gateway.py back-to-back | big | burst

The gateway and the simulator run as bench_gateway.py runs them (their own
processes, uvloop, httptools); py-spy samples the gateway from outside at
1 kHz while this process drives the workload:

  paced         200-chunk replies, chunks 5 ms apart, 20 requests at a time (per-chunk cost)
  back-to-back  the same replies with no pause (reads batch several frames)
  big           ~200 KB Claude Code requests (--size-kb), one at a time (per-request cost)
  burst         waves of 100 streams of 100 chunks 20 ms apart (set-up under load)
  setup         waves of 100 streams of 2-chunk replies (start-up work alone: what the burst TTFT waits for)

Printed: the share of samples in which a function is on the stack (inclusive)
and at the top of it (self), the idle event loop counted apart, so that the
shares add up to the gateway's busy time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import uvloop

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.gateway_sections.rig import TINY_REQUEST, gateway_request
from bench.support.lean_client import batch, checked, wave
from bench.support.processes import GatewayProcess, SimulatorProcess
from bench.support.workloads import claude_code_body

# Frames that mean the event loop is waiting for work, not doing it.
IDLE_FRAMES = ("select (selectors.py", "epoll_wait", "epoll_pwait")


async def drive(workload: str, sim: SimulatorProcess, port: int, until: float, size_kb: int = 200) -> None:
    tiny = gateway_request(port, orjson.dumps(TINY_REQUEST))
    if workload in ("paced", "back-to-back"):
        sim.reply(200, 0.005 if workload == "paced" else 0.0)
        while time.monotonic() < until:
            await batch(tiny, 40, 20, 1)
    elif workload == "big":
        sim.reply(5)
        big = gateway_request(port, claude_code_body(size_kb))
        while time.monotonic() < until:
            await checked(big)
    elif workload == "burst":
        sim.reply(100, 0.02)
        while time.monotonic() < until:
            await wave(tiny, 100, 0.0, 100)
            await asyncio.sleep(0.2)
    elif workload == "setup":
        sim.reply(2)
        while time.monotonic() < until:
            await wave(tiny, 100, 0.0, 2)
    else:
        raise SystemExit(f"unknown workload {workload!r}")


def summarise(raw: str, top: int) -> None:
    """py-spy's raw (collapsed) output: `frame;frame;... count` per line."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    busy = idle = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        if any(marker in frames[-1] for marker in IDLE_FRAMES):
            idle += count
            continue
        busy += count
        for frame in set(frames):
            inclusive[_short(frame)] += count
        own[_short(frames[-1])] += count
    print(f"{busy} busy samples, {idle} idle (event loop waiting)")
    for title, counter in (("inclusive (on the stack)", inclusive), ("self (top of the stack)", own)):
        print(f"\n{title}:")
        for frame, count in counter.most_common(top):
            print(f"  {100 * count / max(busy, 1):5.1f}%  {frame}")


def _short(frame: str) -> str:
    """`name (path/to/module.py:line)` -> `name (module.py)`: lines differ within one function."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    return f"{name} ({'/'.join(Path(path).parts[-2:])})" if path else name


async def run(args: argparse.Namespace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="q2api-profile-"))
    sim = SimulatorProcess(cpu=None)
    gateway = GatewayProcess(sim.env(), scratch, "WARNING", cpu=None)
    raw = scratch / "profile.txt"
    try:
        await gateway.wait_ready()
        sim.reply(5)
        await checked(gateway_request(gateway.port, orjson.dumps(TINY_REQUEST)))  # fetches the token
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        command = [spy, "record", "--pid", str(gateway.pid), "--rate", "1000", "--format", "raw"]
        command += ["--duration", str(round(args.seconds)), "--output", str(raw)]
        # Native frames need the process paused while sampled; Python frames alone do not.
        command.append("--native" if args.native else "--nonblocking")
        profiler = await asyncio.create_subprocess_exec(*command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        await asyncio.sleep(0.5)
        await drive(args.workload, sim, gateway.port, time.monotonic() + args.seconds, args.size_kb)
        _, errors = await profiler.communicate()
        if not raw.exists():
            raise SystemExit(f"py-spy wrote no profile: {errors.decode(errors='replace').strip()}")
        summarise(raw.read_text(), args.top)
    finally:
        gateway.stop()
        sim.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=("paced", "back-to-back", "big", "burst", "setup"))
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--size-kb", type=int, default=200, help="big: the Claude Code request's size")
    parser.add_argument("--native", action="store_true", help="include C frames (uvloop, orjson, httptools)")
    uvloop.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
