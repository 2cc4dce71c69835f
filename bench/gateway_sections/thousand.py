"""Section thousand: 1,000 concurrent streams, 50 chunks 100 ms apart, `q2api serve --workers 2`.

The streams arrive one after another over one second (targets.THOUSAND_RAMP),
so that all 1,000 are open together for the last four seconds of their five;
the client processes share the wave (bench/support/client_pool.py). The
simulator alone gets the same wave first. Targets: no error, TTFT p99 and
longest-gap p99 under their limits. The cores every process used during the
wave say which one was the bottleneck when a target is missed.

For information, the same 1,000 also start together, in one herd: the
simulator alone needs about as long as the TTFT target to start that many.
"""

from __future__ import annotations

from bench.gateway_sections.burst import print_pair
from bench.gateway_sections.rig import Rig, WaveRecord
from bench.support import targets
from bench.support.proc_stats import ForeignLoad


async def thousand_wave(
    rig: Rig, workers: int, streams: int = targets.THOUSAND_STREAMS, ramp: float | None = None
) -> WaveRecord:
    """`streams` streams of the thousand's shape through a gateway with `workers` workers (ramp: --ramp)."""
    ramp = rig.args.ramp if ramp is None else ramp
    await rig.use_gateway(workers)
    target = rig.gateway_target("tiny")
    record = await rig.wave(target, streams, targets.THOUSAND_CHUNKS, targets.THOUSAND_DELAY, ramp)
    if streams == targets.THOUSAND_STREAMS and ramp == rig.args.ramp:
        rig.waves[("thousand", workers)] = record
    return record


async def simulator_alone(rig: Rig, streams: int, ramp: float | None = None) -> WaveRecord:
    ramp = rig.args.ramp if ramp is None else ramp
    target = rig.direct_target("tiny")
    return await rig.wave(target, streams, targets.THOUSAND_CHUNKS, targets.THOUSAND_DELAY, ramp)


async def run(rig: Rig) -> None:
    report = rig.report
    streams, workers = targets.THOUSAND_STREAMS, targets.THOUSAND_WORKERS
    report.section(
        f"5. {streams} concurrent streams (thousand): "
        + (f"arriving over {rig.args.ramp:g} s, " if rig.args.ramp else "started together, ")
        + f"{targets.THOUSAND_CHUNKS} chunks {targets.THOUSAND_DELAY * 1000:g} ms apart, tiny requests, "
        f"--workers {workers}"
    )
    load = ForeignLoad()
    await rig.use_gateway(workers)
    alone = await simulator_alone(rig, streams)
    gateway = await thousand_wave(rig, workers)
    label = f"{streams} streams"
    print_pair(report, label, gateway, alone, targets.THOUSAND_TTFT_P99, targets.THOUSAND_GAP_P99, True)
    report.note(f"largest worker RSS during the wave {gateway.peak_worker_rss_mb:.1f} MB")
    if rig.args.herd and rig.args.ramp:
        herd_alone = await simulator_alone(rig, streams, ramp=0.0)
        herd = await thousand_wave(rig, workers, ramp=0.0)
        label = f"{streams} started together"
        print_pair(report, label, herd, herd_alone, targets.THOUSAND_TTFT_P99, targets.THOUSAND_GAP_P99, False, False)
    report.note(load.describe())
