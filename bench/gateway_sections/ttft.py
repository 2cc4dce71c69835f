"""Section ttft: time to first token the gateway adds at concurrency 1, tiny request and ~200 KB agent request.

One request size at a time (the garbage of 200 KB requests would otherwise
slow the tiny ones down), gateway and simulator alone interleaved in
alternating order so that machine noise falls on both alike. Every request
opens its own connection; the clock runs from opening it to the first read
carrying text. What the gateway adds is the difference of the medians. The gateway's CPU
per request (utime + stime over the counted runs) is printed too: on a busy machine it moves far
less than the wall-clock TTFT.
"""

from __future__ import annotations

import asyncio
import statistics

from bench.gateway_sections.rig import SHORT_REPLY_CHUNKS, Rig
from bench.support import targets
from bench.support.lean_client import checked
from bench.support.proc_stats import ForeignLoad
from bench.support.report import ms, percentile, size


async def run(rig: Rig) -> None:
    args = rig.args
    process = await rig.use_gateway(1)
    report = rig.report
    report.section(
        f"1. TTFT at concurrency 1 (ttft): connection opened -> first text read, {args.runs} runs each, "
        f"one worker; gateway vs the simulator alone"
    )
    load = ForeignLoad()
    rig.sim.reply(SHORT_REPLY_CHUNKS)
    limits = {"tiny": targets.TTFT_ADDED_TINY, "agent": targets.TTFT_ADDED_AGENT}
    for kind, limit in limits.items():
        gateway, direct = rig.gateway_target(kind), rig.direct_target(kind)
        label = "tiny" if kind == "tiny" else rig.agent_label
        through: list[float] = []
        alone: list[float] = []
        cpu_at_start = 0.0
        for index in range(args.warmup + args.runs):
            if index == args.warmup:
                cpu_at_start = process.cpu()
            for target in (gateway, direct) if index % 2 else (direct, gateway):
                result = await checked(target)
                if index >= args.warmup:
                    (through if target is gateway else alone).append(result.ttft or 0.0)
        await asyncio.sleep(0.1)  # the gateway's own end-of-request work counts too
        # The gateway is idle while the simulator alone answers: its CPU over the counted runs is its
        # requests' (a figure a shared machine barely moves, unlike the wall-clock TTFT).
        gateway_cpu = process.cpu() - cpu_at_start
        added = statistics.median(through) - statistics.median(alone)
        report.row(
            f"{label}: simulator alone", f"median {ms(statistics.median(alone))}   p90 {ms(percentile(alone, 0.9))}"
        )
        report.row(
            f"{label}: through the gateway",
            f"median {ms(statistics.median(through))}   p90 {ms(percentile(through, 0.9))}",
        )
        report.judge(
            f"{label}: added by the gateway",
            # Three decimals: the tiny request's target is a fraction of a millisecond.
            f"median {added * 1000:7.3f} ms   p90 {(percentile(through, 0.9) - percentile(alone, 0.9)) * 1000:7.3f} ms",
            f"added TTFT, {'tiny' if kind == 'tiny' else f'~{targets.AGENT_REQUEST_KB} KB agent'} request "
            f"<= {limit * 1000:g} ms",
            added,
            limit,
        )
        report.row(f"{label}: gateway CPU per request", f"{gateway_cpu / args.runs * 1000:7.3f} ms (utime + stime)")
        report.note(f"request body {size(gateway.body_bytes)} to the gateway, {size(direct.body_bytes)} upstream")
    report.note(load.describe())
