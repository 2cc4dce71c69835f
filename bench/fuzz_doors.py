"""Fuzz every door of a real gateway: never a 5xx, always the door's envelope, no traceback in its log.

    .venv/bin/python bench/fuzz_doors.py [--bodies 100000] [--doors messages,chat,responses,admin]
                                         [--seed 1] [--concurrency 8] [--workers 1]

`q2api serve` runs as its own process on a loopback port (its log read line by line), on the
simulated Amazon Q upstream (q2api/testing/) in this process, with the admin API on. Each door has a
fuzzer of its own (tests/support/door_bodies.py): `/v1/messages` (and `count_tokens`),
`/v1/chat/completions`, `/v1/responses` and `/admin/api/...`. A body is a function of (door, seed,
index), so a failure prints the three numbers that replay it:

    .venv/bin/python bench/fuzz_doors.py --replay responses:1:4711

Printed per door: bodies sent, the status histogram, the 5xx count, answers outside the door's
envelope, and the tracebacks and ERROR lines of the gateway's log while that door was fuzzed.
Exit status 1 when any door has a 5xx, a bad envelope, a traceback or an ERROR line.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2

from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.door_bodies import DOOR_FUZZERS, DoorFuzzer, FuzzRequest
from tests.support.serve_process import serve

CLIENT_KEY = "fuzz-doors-client-key"
ADMIN_KEY = "fuzz-doors-admin-key"
TIMEOUT = 60.0
_LEVEL = re.compile(r"^\S+ \S+ \| (?P<level>[A-Z]+) *\|")  # the text log's `time | LEVEL | message`


@dataclass
class DoorRun:
    door: str
    sent: int = 0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    bad: list[str] = field(default_factory=list)  # the first few answers that broke the rule, with their replay
    bad_count: int = 0
    tracebacks: int = 0
    error_lines: int = 0
    seconds: float = 0.0

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 500)


def headers_for(request: FuzzRequest) -> dict[str, str]:
    key = ADMIN_KEY if request.path.startswith("/admin/") else CLIENT_KEY
    return {"authorization": f"Bearer {key}", "content-type": "application/json", **request.headers}


async def send(http: httpx2.AsyncClient, request: FuzzRequest) -> tuple[int, bytes]:
    response = await http.request(
        request.method, request.path, content=request.body or None, headers=headers_for(request)
    )
    return response.status_code, response.content


async def fuzz_door(
    base_url: str, fuzzer: DoorFuzzer, seed: int, bodies: int, concurrency: int, seconds: float | None = None
) -> DoorRun:
    run = DoorRun(fuzzer.name)
    deadline = time.monotonic() + seconds if seconds else None
    indices = iter(range(bodies))
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(base_url=base_url, timeout=TIMEOUT, limits=limits, trust_env=False) as http:

        async def worker() -> None:
            for index in indices:
                if deadline is not None and time.monotonic() > deadline:
                    return  # out of time: the report says how many were sent
                request = fuzzer.request(seed, index)
                try:
                    status, body = await send(http, request)
                    problem = fuzzer.problem(status, body)
                except httpx2.HTTPError as error:  # the connection broke, or no answer in time: a failure too
                    status, problem = 0, f"no answer: {error!r}"
                run.sent += 1
                run.statuses[status] += 1
                if problem is not None:
                    run.bad_count += 1
                    if len(run.bad) < 5:
                        run.bad.append(
                            f"--replay {fuzzer.name}:{seed}:{index} {request.method} {request.path}: {problem}"
                        )

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        run.seconds = time.perf_counter() - started
    return run


def log_faults(lines: list[str]) -> tuple[int, int, list[str]]:
    tracebacks = sum("Traceback (most recent call last)" in line for line in lines)
    errors = [line for line in lines if _LEVEL.match(line) and _LEVEL.match(line)["level"] in ("ERROR", "CRITICAL")]
    return tracebacks, len(errors), errors[:3]


def report(runs: list[DoorRun]) -> bool:
    clean = True
    print(f"{'door':10} {'bodies':>8} {'bodies/s':>9} {'5xx':>5} {'bad':>5} {'tracebacks':>10} {'ERROR':>6}  statuses")
    for run in runs:
        histogram = " ".join(f"{status}:{count}" for status, count in sorted(run.statuses.items()))
        rate = run.sent / run.seconds if run.seconds else 0.0
        print(
            f"{run.door:10} {run.sent:8} {rate:9.0f} {run.server_errors:5} {run.bad_count:5} {run.tracebacks:10} "
            f"{run.error_lines:6}  {histogram}"
        )
        clean = clean and not (run.server_errors or run.bad_count or run.tracebacks or run.error_lines)
    for run in runs:
        for line in run.bad:
            print(f"  {run.door}: {line}")
    return clean


def replay(spec: str) -> None:
    door, seed, index = spec.split(":")
    request = DOOR_FUZZERS[door].request(int(seed), int(index))
    print(request.method, request.path)
    sys.stdout.buffer.write(request.body[:20_000] + b"\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=100_000, help="bodies per door")
    parser.add_argument("--doors", default=",".join(DOOR_FUZZERS), help="comma-separated: " + ", ".join(DOOR_FUZZERS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    parser.add_argument(
        "--seconds", type=float, default=None, help="stop each door after this long (default: no limit)"
    )
    parser.add_argument("--replay", help="door:seed:index — print that body and exit")
    args = parser.parse_args()
    if args.replay:
        replay(args.replay)
        return 0
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # the simulator's noise when a client leaves
    runs: list[DoorRun] = []
    with SimulatedUpstream.run_in_thread() as upstream, tempfile.TemporaryDirectory() as tmp:
        extra = {
            "Q2API_ADMIN_KEY": ADMIN_KEY,
            "Q2API_STREAM_HOLD_SECONDS": "0",
        }
        with serve(Path(tmp), upstream.env("idc"), workers=args.workers, client_key=CLIENT_KEY, **extra) as gateway:
            for door in args.doors.split(","):
                del gateway.lines[:]  # INFO logs a line or two per request: hold one door's at a time
                run = asyncio.run(
                    fuzz_door(
                        gateway.base_url, DOOR_FUZZERS[door], args.seed, args.bodies, args.concurrency, args.seconds
                    )
                )
                time.sleep(0.5)  # the last lines of the door's requests reach the reader
                run.tracebacks, run.error_lines, samples = log_faults(gateway.lines)
                run.bad.extend(f"log: {line[:300]}" for line in samples)
                runs.append(run)
                print(f"{door}: {run.sent} bodies in {run.seconds:.0f} s", flush=True)
    return 0 if report(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
