"""Section ttft: the TTFT and the CPU a Claude Code turn of 0.2, 1 and 2 MB costs the gateway (item 1).

One workload at a time, at concurrency 1, the gateway and the simulator alone interleaved in
alternating order, so that the machine's noise falls on both alike; the simulator-alone request
is the very body and headers the gateway sent upstream. The same body every time: from the second
on the gateway resumes from its own conversion checkpoint, as a session's next turn does.

CPU is utime + stime from /proc over the counted runs: the gateway's (idle while the simulator alone
answers, so all of it is its requests'), and the simulator's, which read the same upstream body twice
per run (once from the gateway, once alone) — gateway ÷ simulator is the ratio a busy machine moves least.
"""

from __future__ import annotations

import asyncio
import statistics

from bench.gateway_sections.rig import SHORT_REPLY_CHUNKS, Rig
from bench.support.lean_client import checked
from bench.support.proc_stats import ForeignLoad
from bench.support.report import ms, percentile, size
from bench.turn_sections import targets


async def run(rig: Rig) -> None:
    args = rig.args
    process = await rig.use_gateway(1)
    report = rig.report
    report.section(
        f"1a. TTFT and CPU per Claude Code turn (ttft): {args.runs} runs each, one at a time, one worker; "
        "gateway vs the simulator alone, same upstream body"
    )
    rig.sim.reply(SHORT_REPLY_CHUNKS)
    for kind in args.workloads:
        load = ForeignLoad()
        gateway, direct = rig.gateway_target(kind), rig.direct_target(kind)
        through: list[float] = []
        alone: list[float] = []
        gateway_cpu = sim_cpu = 0.0
        for index in range(args.warmup + args.runs):
            if index == args.warmup:
                gateway_cpu, sim_cpu = process.cpu(), rig.sim.cpu()
            for target in (gateway, direct) if index % 2 else (direct, gateway):
                result = await checked(target)
                if index >= args.warmup:
                    (through if target is gateway else alone).append(result.ttft or 0.0)
        await asyncio.sleep(0.1)  # the gateway's own end-of-request work counts too
        gateway_cpu = (process.cpu() - gateway_cpu) / args.runs
        sim_cpu = (rig.sim.cpu() - sim_cpu) / (2 * args.runs)
        megabytes = gateway.body_bytes / 2**20
        added = statistics.median(through) - statistics.median(alone)
        label = f"{kind} ({size(gateway.body_bytes)}, {size(direct.body_bytes)} upstream)"
        report.row(
            f"{label}: simulator alone", f"median {ms(statistics.median(alone))}   p90 {ms(percentile(alone, 0.9))}"
        )
        report.row(
            f"{label}: through the gateway",
            f"median {ms(statistics.median(through))}   p90 {ms(percentile(through, 0.9))}",
        )
        figure = (
            f"median {added * 1000:7.2f} ms   p90 {(percentile(through, 0.9) - percentile(alone, 0.9)) * 1000:7.2f} ms"
        )
        limit = targets.TTFT_ADDED.get(kind)
        if limit is None:
            report.row(f"{label}: added by the gateway", figure)
        else:
            report.judge(
                f"{label}: added by the gateway", figure, f"added TTFT, {kind} <= {limit * 1000:g} ms", added, limit
            )
        cpu_figure = (
            f"{gateway_cpu * 1000:7.2f} ms = {gateway_cpu / megabytes * 1000:5.2f} ms/MB; "
            f"simulator {sim_cpu * 1000:.2f} ms; gateway/simulator {gateway_cpu / sim_cpu if sim_cpu else float('inf'):.2f}x"
        )
        if kind == "200kb":
            report.row(f"{label}: gateway CPU per request", cpu_figure)
        else:
            report.judge(
                f"{label}: gateway CPU per request",
                cpu_figure,
                f"CPU per MB, {kind} <= {targets.CPU_PER_MB * 1000:g} ms",
                gateway_cpu / megabytes,
                targets.CPU_PER_MB,
            )
        report.note(load.describe())
