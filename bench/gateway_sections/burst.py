"""Section burst: 100 streams started together, 100 chunks 20 ms apart, on one worker.

Waves to the gateway and to the simulator alone alternate (the simulator
first: the floor), and the figures are over all the waves of each. Each
stream's longest gap is the longest wait between two consecutive reads
carrying text; TTFT and that gap are given at p50, p99 and max over streams.
"""

from __future__ import annotations

import asyncio

from bench.gateway_sections.rig import Rig, WaveRecord
from bench.support import targets
from bench.support.lean_client import StreamResult
from bench.support.proc_stats import ForeignLoad
from bench.support.report import Report, ms
from bench.support.wave_summary import WaveSummary


async def burst_waves(rig: Rig, workers: int, waves: int) -> tuple[WaveRecord, WaveRecord]:
    """(through the gateway, simulator alone), `waves` bursts each, pooled."""
    await rig.use_gateway(workers)
    records: dict[str, list[WaveRecord]] = {"gateway": [], "simulator": []}
    for _ in range(waves):
        for target in (rig.direct_target("tiny"), rig.gateway_target("tiny")):
            records[target.name].append(
                await rig.wave(target, targets.BURST_STREAMS, targets.BURST_CHUNKS, targets.BURST_DELAY)
            )
            await asyncio.sleep(0.3)
    pooled = (_pool(records["gateway"]), _pool(records["simulator"]))
    rig.waves[("burst", workers)] = pooled[0]
    return pooled


def _pool(records: list[WaveRecord]) -> WaveRecord:
    """Several waves as one record: every stream counted, cores averaged over the waves."""
    results: list[StreamResult] = [result for record in records for result in record.outcome.results]
    count = len(records)
    first = records[0]
    return WaveRecord(
        summary=WaveSummary.of(results),
        outcome=first.outcome,
        through_gateway=first.through_gateway,
        gateway_cores=sum(record.gateway_cores for record in records) / count,
        simulator_cores=sum(record.simulator_cores for record in records) / count,
        client_cores=sum(record.client_cores for record in records) / count,
        other_cores=sum(record.other_cores for record in records) / count,
        peak_worker_rss_mb=max(record.peak_worker_rss_mb for record in records),
        peaks={name: max(record.peaks.get(name, 0.0) for record in records) for name in first.peaks},
    )


def print_pair(
    report: Report,
    label: str,
    gateway: WaveRecord,
    alone: WaveRecord,
    ttft: float,
    gap: float,
    errors_judged: bool,
    judged: bool = True,
) -> None:
    """The gateway's figures judged against the targets (unless not `judged`), the simulator alone's beside them.

    `errors_judged`: "no error" is a target of its own (the 1,000 streams); otherwise failures are shown, not judged.
    """
    g, a = gateway.summary, alone.summary
    report.row(f"{label}, simulator alone: TTFT", a.ttft_text())
    report.row(f"{label}, simulator alone: longest gap", a.gap_text())
    report.note(a.health_text())
    if judged and errors_judged:
        report.judge_met(f"{label}, gateway: errors", g.errors_text(), f"{label}: no error", not g.failed)
    else:
        report.row(f"{label}, gateway: errors", g.errors_text())
    if judged:
        report.judge(
            f"{label}, gateway: TTFT", g.ttft_text(), f"{label}: TTFT p99 <= {ttft * 1000:g} ms", g.ttft_p99, ttft
        )
        report.judge(
            f"{label}, gateway: longest gap",
            g.gap_text(),
            f"{label}: longest-gap p99 <= {gap * 1000:g} ms",
            g.gap_p99,
            gap,
        )
    else:
        report.row(f"{label}, gateway: TTFT", g.ttft_text(), "(for information)")
        report.row(f"{label}, gateway: longest gap", g.gap_text(), "(for information)")
    report.note(g.health_text())
    report.note(
        f"added by the gateway at p99: TTFT {ms(g.ttft_p99 - a.ttft_p99).strip()}, "
        f"longest gap {ms(g.gap_p99 - a.gap_p99).strip()}"
    )
    report.note("through the gateway, " + gateway.cores_text())
    report.note("simulator alone, " + alone.cores_text())


async def run(rig: Rig) -> None:
    report = rig.report
    report.section(
        f"3. {targets.BURST_STREAMS} streams started together (burst): {targets.BURST_CHUNKS} chunks "
        f"{targets.BURST_DELAY * 1000:g} ms apart, tiny requests, one worker, {rig.args.bursts} waves each"
    )
    load = ForeignLoad()
    gateway, alone = await burst_waves(rig, 1, rig.args.bursts)
    print_pair(
        report, f"{targets.BURST_STREAMS} streams", gateway, alone, targets.BURST_TTFT_P99, targets.BURST_GAP_P99, False
    )
    report.note(load.describe())
