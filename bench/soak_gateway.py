"""Soak: many requests with random disconnects, slow readers and upstream faults; is anything left behind?

    .venv/bin/python bench/soak_gateway.py [--requests 10000] [--concurrency 40] [--seed 1]

The gateway runs as deployed (`python -m q2api serve`, its own process) in front of the
simulated Amazon Q (a thread of this process). Each request draws one behaviour:

  complete      a streamed reply read to the end
  json          a non-streaming reply
  leave-early   the client closes the connection after the first chunk
  leave-before  the client gives up before the response starts (slow upstream headers)
  slow-reader   the client reads a long reply in small sips with pauses
  fault         Amazon Q fails: throttled, overloaded, dropped, corrupted, cut off, 500

At every checkpoint the gateway's RSS, its open file descriptors and the connections
open to the simulator are sampled after the load has drained. Flat lines are the result:
a leak of memory, sockets or upstream requests shows as a rising column. Nothing is
asserted; the table is the report (BENCHMARKS.md quotes it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support.processes import API_KEY, GatewayProcess
from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread

BEHAVIOURS = ("complete", "json", "leave-early", "leave-before", "slow-reader", "fault")
WEIGHTS = (40, 15, 15, 5, 10, 15)
FAULTS = (
    scripts.throttled,
    scripts.model_overloaded,
    scripts.dropped_reply,
    scripts.corrupted_reply,
    scripts.truncated_reply,
    lambda: scripts.server_error(500),
)
MARKER = "soak-behaviour:"


def request_body(behaviour: str, stream: bool) -> dict[str, object]:
    # The behaviour travels in the message text, which reaches the simulator in the converted body.
    content = f"{MARKER}{behaviour}"
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "stream": stream,
        "messages": [{"role": "user", "content": content}],
    }


def reply_for(record: RecordedRequest, rng: random.Random) -> scripts.Reply:
    said = record.raw.decode(errors="replace")
    behaviour = next((name for name in BEHAVIOURS if f"{MARKER}{name}" in said), "complete")
    if behaviour == "fault":
        return rng.choice(FAULTS)()
    if behaviour == "slow-reader":
        return scripts.text_reply("sip " * 4000, chunks=200)
    if behaviour == "leave-before":
        return scripts.slow_headers(2.0)
    return scripts.text_reply("steady " * 200, chunks=40, delay=0.002)


async def one_request(session: aiohttp.ClientSession, url: str, behaviour: str, outcomes: Counter[str]) -> None:
    headers = {"x-api-key": API_KEY}
    body = request_body(behaviour, stream=behaviour != "json")
    try:
        # A client that gives up before the headers: aiohttp closes the connection at its timeout.
        timeout = aiohttp.ClientTimeout(total=0.2 if behaviour == "leave-before" else 60)
        async with session.post(url, json=body, headers=headers, timeout=timeout) as response:
            if behaviour == "leave-early":
                await response.content.readany()
                response.close()  # drop the connection mid-stream
            elif behaviour == "slow-reader":
                while await response.content.read(512):
                    await asyncio.sleep(0.01)
            else:
                await response.read()
            outcomes[f"{behaviour}:{response.status}"] += 1
            return
    except (TimeoutError, aiohttp.ClientError):
        pass
    outcomes[f"{behaviour}:client-closed"] += 1


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def drained(sim: SimulationThread, timeout: float = 15.0) -> None:
    """Wait until no stream is open upstream (closed requests may take a moment to be noticed)."""
    deadline = time.monotonic() + timeout
    while sim.sim.active_streams and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def run(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    # The simulator's web server reports each client that left mid-reply: expected here, by the thousand.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    with SimulatedUpstream.run_in_thread() as sim, tempfile.TemporaryDirectory(prefix="q2api-soak-") as scratch:
        sim.sim.responder = lambda record: reply_for(record, rng)
        gateway = GatewayProcess(sim.env(), Path(scratch), "WARNING", cpu=None)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
            await gateway.wait_ready()
            url = gateway.base_url + "/v1/messages"
            outcomes: Counter[str] = Counter()
            print(f"soak: {args.requests} requests, {args.concurrency} at a time, seed {args.seed}")
            print(f"{'requests':>9} {'RSS MB':>8} {'fds':>5} {'upstream conns':>15} {'open upstream':>14} {'s':>6}")
            print(
                f"{0:>9} {gateway.rss_mb():>8.1f} {open_fds(gateway.pid):>5} {sim.sim.open_connections:>15} {0:>14} {0:>6}"
            )
            started = time.monotonic()
            done = 0
            wave_size = max(args.requests // 10, 1)
            while done < args.requests:
                # One wave per checkpoint, sampled once the wave has drained.
                pending = iter(range(min(wave_size, args.requests - done)))

                async def worker(pending: Iterator[int] = pending) -> None:
                    for _ in pending:
                        await one_request(session, url, rng.choices(BEHAVIOURS, WEIGHTS)[0], outcomes)

                await asyncio.gather(*(worker() for _ in range(args.concurrency)))
                done += min(wave_size, args.requests - done)
                await drained(sim)
                await asyncio.sleep(0.5)
                print(
                    f"{done:>9} {gateway.rss_mb():>8.1f} {open_fds(gateway.pid):>5} "
                    f"{sim.sim.open_connections:>15} {sim.sim.active_streams:>14} {time.monotonic() - started:>6.0f}"
                )
        gateway.stop()
    print("outcomes:", ", ".join(f"{key}={value}" for key, value in sorted(outcomes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
