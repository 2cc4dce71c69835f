"""Section instructions: the gateway's CPU per Claude Code turn as instructions counted by callgrind (item 1).

bench/count_instructions.py's `agent` workload for each size: the gateway under
`valgrind --tool=callgrind`, instrumented only while it serves the measured requests (the same body
each time, a session's next turn), on a simulator of its own. A shared machine moves CPU times by
tens of percent; it does not move these counts, so they are the figure that decides whether a change
pays. No target: instructions are not milliseconds; per MB they say whether the cost grows linearly.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.count_instructions import count
from bench.gateway_sections.rig import Rig
from bench.support.workloads import WORKLOADS


async def run(rig: Rig) -> None:
    args = rig.args
    rig.stop_gateway()  # one gateway at a time: the one under callgrind is started here
    report = rig.report
    report.section(
        f"1b. Instructions per Claude Code turn (instructions): callgrind, {args.callgrind_requests} requests each"
    )
    per_mb = {}
    for kind in args.workloads:
        if kind == "200kb" and len(args.workloads) > 1:
            continue  # the large ones are the question; 200 KB is bench_gateway.py's
        options = argparse.Namespace(
            workload="agent",
            size_kb=WORKLOADS[kind],
            requests=args.callgrind_requests,
            without="nothing",
            chunks=200,
            gateway_command=args.gateway_command,
        )
        with tempfile.TemporaryDirectory(prefix="q2api-instructions-") as scratch:
            total = await count(options, Path(scratch))
        per_request = total / args.callgrind_requests
        megabytes = len(rig.bodies[kind]) / 2**20
        per_mb[kind] = per_request / megabytes
        report.row(
            f"{kind}: per request", f"{per_request / 1e6:8.1f} M instructions = {per_mb[kind] / 1e6:6.1f} M per MB"
        )
    if len(per_mb) > 1:
        smallest, largest = min(per_mb.values()), max(per_mb.values())
        report.note(f"per MB, largest / smallest: {largest / smallest:.2f} (1.00: linear in size)")
