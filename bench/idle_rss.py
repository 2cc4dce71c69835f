"""A worker's idle RSS, the way bench_big_turns.py's memory section reads it, alone and fast (issue 33, item 3).

    .venv/bin/python bench/idle_rss.py                     # three fresh gateways, one after the other
    .venv/bin/python bench/idle_rss.py --runs 5 --gateway-command ".venv/bin/python bench/launch_checkout.py /tmp/before"
    .venv/bin/python bench/idle_rss.py --store-key         # its client holds a store key (`q2api keys create`)

Each run: `python -m q2api serve`, one worker, the default SQLite store in a fresh data directory, the
simulated Amazon Q as its upstream, the client holding an environment key (Q2API_API_KEYS) — or a store
key with `--store-key`; 24 tiny streamed requests to warm it up (the account's access token fetched),
then VmRSS once its CPU has gone quiet: "idle". VmRSS just after start-up is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gateway_sections.rig import GATEWAY_HEADERS, Rig
from bench.support import machine
from bench.support.client_pool import ClientPool
from bench.support.lean_client import GATEWAY_MARKERS, batch, post_target
from bench.support.report import Report


async def run(args: argparse.Namespace, pool: ClientPool) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="q2api-idle-rss-"))
    rig = Rig(args, Report(), scratch, pool)
    key: dict[str, str] = {}
    if args.store_key:
        from bench.bench_overhead import make_store_key

        rig.before_gateway = lambda data_dir, env: make_store_key(data_dir, env, key)
    try:
        for line in machine.describe():
            print(line)
        idle, started = [], []
        rig.bodies.pop("agent", None)  # tiny requests only: every run alike
        for _ in range(args.runs):
            rig.stop_gateway()
            gateway = await rig.use_gateway(1)
            started.append(max(rig.started_rss[1]))
            idle.append(max(rig.idle_rss[1]))
            if args.store_key:  # the store key's path too (admission, counters, the ledger), then idle again
                headers = {**GATEWAY_HEADERS, "x-api-key": key["key"]}
                tiny = post_target(
                    "gateway", "127.0.0.1", gateway.port, "/v1/messages", headers, rig.bodies["tiny"], GATEWAY_MARKERS
                )
                for _ in range(3):
                    for result in await batch(tiny, 8, 4, 1):
                        if result.error:
                            raise RuntimeError(f"a store-key request failed: {result.error}")
                await gateway.settle()
                await asyncio.sleep(1.5)
                idle[-1] = max(idle[-1], *gateway.worker_rss_mb())
            print(f"  idle {idle[-1]:.1f} MB (just after start-up {started[-1]:.1f} MB)", flush=True)
        idle.sort()
        print(
            f"idle RSS: median {idle[len(idle) // 2]:.1f} MB, min {idle[0]:.1f}, max {idle[-1]:.1f} ({args.runs} runs)"
        )
    finally:
        rig.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gateway-command", help="as bench_big_turns.py's")
    parser.add_argument("--store-key", action="store_true", help="the client holds a store key, every limit set")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    args.size_kb, args.pin, args.max_connections, args.keep_logs = 16, False, 20000, False
    pool = ClientPool(1)
    try:
        uvloop.run(run(args, pool))
    finally:
        pool.close()


if __name__ == "__main__":
    main()
