"""Section workers: figures for choosing the default of `q2api serve --workers` on a multi-core machine.

The same two loads with one worker and with two: the 100-stream burst and the
1,000 concurrent streams, side by side, with the CPU the gateway used and the
memory its workers held. Waves another section already ran are reused. No
target: the figures are there to argue the default with.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.gateway_sections.burst import burst_waves
from bench.gateway_sections.rig import Rig, WaveRecord
from bench.gateway_sections.thousand import thousand_wave
from bench.support import targets
from bench.support.proc_stats import ForeignLoad

COUNTS = (1, 2)


async def _waves(rig: Rig) -> dict[tuple[str, int], WaveRecord]:
    # The gateway running now first, so that it is restarted as seldom as possible.
    running = rig.gateway.workers if rig.gateway is not None else 1
    for workers in sorted(COUNTS, key=lambda count: count != running):
        if ("burst", workers) not in rig.waves:
            await burst_waves(rig, workers, rig.args.bursts)
        if ("thousand", workers) not in rig.waves:
            await thousand_wave(rig, workers)
        if workers not in rig.idle_rss:
            await rig.use_gateway(workers)
    return rig.waves


async def run(rig: Rig) -> None:
    report = rig.report
    report.section(
        "7. --workers 1 vs 2 (workers): the burst and the thousand streams with each, for choosing the default"
    )
    load = ForeignLoad()
    waves = await _waves(rig)
    header = "   ".join(f"{f'--workers {count}':>22}" for count in COUNTS)
    report.row("load / figure", header)
    loads = {
        "burst": f"{targets.BURST_STREAMS} burst",
        "thousand": f"{targets.THOUSAND_STREAMS} streams",
    }
    for name, label in loads.items():
        records = [waves[(name, count)] for count in COUNTS]
        report.row(f"{label}: TTFT p99", _columns(f"{r.summary.ttft_p99 * 1000:.1f} ms" for r in records))
        report.row(f"{label}: longest-gap p99", _columns(f"{r.summary.gap_p99 * 1000:.1f} ms" for r in records))
        report.row(f"{label}: failed streams", _columns(str(r.summary.failed) for r in records))
        report.row(f"{label}: gateway cores used", _columns(f"{r.gateway_cores:.2f}" for r in records))
        report.row(f"{label}: largest worker RSS", _columns(f"{r.peak_worker_rss_mb:.1f} MB" for r in records))
    report.row(
        "idle RSS, each worker",
        _columns(" + ".join(f"{rss:.0f}" for rss in rig.idle_rss[count]) + " MB" for count in COUNTS),
    )
    report.note(
        f"targets: burst TTFT p99 <= {targets.BURST_TTFT_P99 * 1000:g} ms, gap p99 <= {targets.BURST_GAP_P99 * 1000:g}"
        f" ms (one worker); {targets.THOUSAND_STREAMS} streams TTFT p99 <= {targets.THOUSAND_TTFT_P99 * 1000:g} ms, "
        f"gap p99 <= {targets.THOUSAND_GAP_P99 * 1000:g} ms (two workers)"
    )
    report.note(load.describe())


def _columns(values: Iterable[str]) -> str:
    return "   ".join(f"{value:>22}" for value in values)
