"""Section memory: a worker's RSS idle, at 50 concurrent 1 MB and 100 concurrent 2 MB streams, and a minute after (item 3).

A fresh gateway (one worker), warmed up with a few tiny requests: its VmRSS is the idle figure. Then
each wave — its streams started together, every reply 50 chunks 100 ms apart so that they are all
open at once — with VmRSS sampled every 10 ms and VmHWM read after resetting it, whichever is larger;
then a minute of silence and VmRSS again, which must be back within 10 % of idle: memory bounded by
what is in flight, not by what once was.
"""

from __future__ import annotations

import asyncio

from bench.gateway_sections.rig import Rig
from bench.support.proc_stats import ForeignLoad, RssSampler
from bench.turn_sections import targets


async def run(rig: Rig) -> None:
    rig.stop_gateway()  # a fresh worker: its idle figure is not what earlier sections left
    gateway = await rig.use_gateway(1)
    report = rig.report
    report.section("3. Memory of one worker (memory): VmRSS and VmHWM from /proc")
    load = ForeignLoad()
    idle = max(rig.idle_rss[1])
    report.judge(
        "idle after start-up and warm-up",
        f"{idle:6.1f} MB",
        f"RSS idle <= {targets.RSS_IDLE_MB:g} MB",
        idle,
        targets.RSS_IDLE_MB,
    )
    report.note(f"just after start-up {max(rig.started_rss[1]):.1f} MB")
    for (kind, streams), limit in targets.RSS_PEAK_MB.items():
        hwm_reset = gateway.reset_hwm()
        with RssSampler(gateway.worker_pids) as sampler:
            record = await rig.wave(rig.gateway_target(kind), streams, targets.MEMORY_CHUNKS, targets.MEMORY_DELAY)
        hwm = gateway.hwm_mb()
        peak = max(sampler.peak_mb, hwm) if hwm_reset else sampler.peak_mb
        report.judge(
            f"peak at {streams} concurrent {kind} streams",
            f"{peak:6.1f} MB",
            f"peak RSS at {streams} concurrent {kind} streams <= {limit:g} MB",
            peak,
            limit,
        )
        report.note(
            f"{record.summary.errors_text()}; TTFT p50 {record.summary.ttft_p50 * 1000:.0f} ms, "
            f"p99 {record.summary.ttft_p99 * 1000:.0f} ms; {record.cores_text()}"
        )
        right_after = gateway.rss_mb()
        await asyncio.sleep(targets.RSS_SETTLE_SECONDS)
        settled = gateway.rss_mb()
        report.judge(
            f"{targets.RSS_SETTLE_SECONDS:g} s after the {kind} wave",
            f"{settled:6.1f} MB ({settled / idle:.2f}x idle; {right_after:.1f} MB right after the wave)",
            f"RSS a minute after the {kind} wave <= {targets.RSS_SETTLED_RATIO:g}x idle",
            settled / idle,
            targets.RSS_SETTLED_RATIO,
        )
    report.note(load.describe())
