"""Section max: the largest number of concurrent streams that still meets the 1,000-stream targets.

Streams of the thousand's shape (arriving over --ramp seconds, 50 chunks 100 ms
apart, `--workers 2`) at 1000, 1500, 2000, 3000… until a level misses a target
(an error, TTFT p99, longest-gap p99), then bisected between the last level met
and the first missed, to a tenth of the level met — within a cap (what the
open-file limit allows, and --max-cap) and a time budget (--max-budget). A
level is met when --max-repeats waves in a row meet the targets: near the
limit, single waves disagree by the noise of a shared machine alone.

The first level missed is also run against the simulator alone: if that misses
too, the limit found is the rig's (the simulator or the machine), not only the
gateway's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import resource
import time

from bench.gateway_sections.rig import Rig, WaveRecord
from bench.gateway_sections.thousand import simulator_alone, thousand_wave
from bench.support import targets

LEVELS = (1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000, 16000)
# Descriptors kept apart from the streams' (logs, pipes, the listening sockets…).
SPARE_FDS = 1000
# Levels are multiples of this.
GRAIN = 50


@dataclasses.dataclass(frozen=True)
class Trial:
    streams: int
    record: WaveRecord  # the wave that missed, or the last one that met
    shortfalls: list[str]
    log_problems: list[str]
    waves: int  # how many waves of this level ran

    @property
    def met(self) -> bool:
        return not self.shortfalls


def stream_cap(asked: int) -> int:
    """At most `asked`, and no more than the open-file limit allows the gateway's busiest worker.

    A worker holds two descriptors per stream (the client's socket, the upstream
    one), and with two workers one of them may take most of a wave.
    """
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(GRAIN, min(asked, (soft - SPARE_FDS) // 2) // GRAIN * GRAIN)


async def trial(rig: Rig, streams: int, repeats: int) -> Trial:
    """Up to `repeats` waves of `streams`: the level is met if every one meets the targets.

    Near the limit one wave may meet and the next miss, by the noise of a shared
    machine alone; a level met twice is a figure one can quote.
    """
    result: Trial | None = None
    for attempt in range(repeats):
        result = await _wave(rig, streams, reuse=attempt == 0, waves=attempt + 1)
        if not result.met:
            break
    assert result is not None
    return result


async def _wave(rig: Rig, streams: int, reuse: bool, waves: int) -> Trial:
    gateway = await rig.use_gateway(targets.THOUSAND_WORKERS)  # a fresh one if the last wave killed it
    reused = None
    if reuse and streams == targets.THOUSAND_STREAMS:
        reused = rig.waves.get(("thousand", targets.THOUSAND_WORKERS))
    log_at = gateway.log_size()
    record = reused or await thousand_wave(rig, targets.THOUSAND_WORKERS, streams)
    shortfalls = record.summary.shortfalls(targets.THOUSAND_TTFT_P99, targets.THOUSAND_GAP_P99)
    if not gateway.alive():
        shortfalls.append("the gateway (or a worker) died")
    result = Trial(streams, record, shortfalls, [] if reused else gateway.log_problems(log_at), waves)
    summary = record.summary
    print(
        f"  {streams:>6} streams: {'met' if result.met else 'MISSED':<6}   TTFT p99 {summary.ttft_p99 * 1000:6.0f} ms   "
        f"gap p99 {summary.gap_p99 * 1000:6.0f} ms   {summary.errors_text()}"
        + ("   (the thousand section's wave)" if reused else ""),
        flush=True,
    )
    if not reused:
        await asyncio.sleep(1.0)
    return result


async def run(rig: Rig) -> None:
    args = rig.args
    report = rig.report
    cap = stream_cap(args.max_cap)
    report.section(
        f"6. Largest concurrency meeting the {targets.THOUSAND_STREAMS}-stream targets (max): --workers "
        f"{targets.THOUSAND_WORKERS}, levels {', '.join(str(level) for level in LEVELS if level <= cap)}… "
        f"then bisected; arriving over {args.ramp:g} s; waves per level that must meet the targets: "
        f"{args.max_repeats}; cap {cap}, time budget {args.max_budget:g} s"
    )
    deadline = time.monotonic() + args.max_budget
    wave_seconds = targets.THOUSAND_CHUNKS * targets.THOUSAND_DELAY

    def affordable(streams: int) -> bool:
        # A wave, starting and ending its streams, and the pause after it.
        return time.monotonic() + args.max_repeats * (wave_seconds + args.ramp + 2.5 + streams / 1000) <= deadline

    trials: list[Trial] = []
    met: Trial | None = None
    missed: Trial | None = None
    stopped = ""
    for streams in [level for level in LEVELS if level < cap] + [cap]:
        if not affordable(streams):
            stopped = "the time budget ran out"
            break
        trials.append(await trial(rig, streams, args.max_repeats))
        if not trials[-1].met:
            missed = trials[-1]
            break
        met = trials[-1]
    else:
        stopped = f"the cap of {cap} streams was reached"
    # Even the first level missed: halve until a level is met.
    while met is None and missed is not None and missed.streams // 2 >= GRAIN:
        streams = missed.streams // 2 // GRAIN * GRAIN
        if not affordable(streams):
            stopped = "the time budget ran out"
            break
        trials.append(await trial(rig, streams, args.max_repeats))
        met, missed = (trials[-1], missed) if trials[-1].met else (None, trials[-1])
    # Bisect down to a tenth of the level met.
    while met is not None and missed is not None and missed.streams - met.streams > max(GRAIN, met.streams // 10):
        streams = (met.streams + missed.streams) // 2 // GRAIN * GRAIN
        if not affordable(streams):
            stopped = "the time budget ran out"
            break
        trials.append(await trial(rig, streams, args.max_repeats))
        met, missed = (trials[-1], missed) if trials[-1].met else (met, trials[-1])

    for each in sorted(trials, key=lambda trial: trial.streams):
        summary = each.record.summary
        report.row(
            f"{each.streams} streams",
            f"TTFT p99 {summary.ttft_p99 * 1000:6.0f} ms   gap p99 {summary.gap_p99 * 1000:6.0f} ms   "
            f"{summary.errors_text()}",
            f"met by {each.waves} wave{'s' if each.waves > 1 else ''}"
            if each.met
            else f"MISSED by wave {each.waves}: " + "; ".join(each.shortfalls),
        )
        report.note(each.record.cores_text())
    largest = met.streams if met else 0
    report.judge_met(
        "largest concurrency meeting them",
        f"{largest} streams" if met else "none",
        f"largest concurrency meeting the {targets.THOUSAND_STREAMS}-stream targets >= {targets.THOUSAND_STREAMS}",
        largest >= targets.THOUSAND_STREAMS,
    )
    if missed is not None:
        report.row("first level missed", f"{missed.streams} streams", "because " + "; ".join(missed.shortfalls))
        for line in missed.log_problems[:3]:
            report.note(f"gateway log: {line[:200]}")
        if len(missed.log_problems) > 3:
            report.note(f"… and {len(missed.log_problems) - 3} more warnings or errors in the gateway's log")
        alone = await simulator_alone(rig, missed.streams)
        shortfalls = alone.summary.shortfalls(targets.THOUSAND_TTFT_P99, targets.THOUSAND_GAP_P99)
        report.row(
            f"simulator alone at {missed.streams}",
            f"TTFT p99 {alone.summary.ttft_p99 * 1000:6.0f} ms   gap p99 {alone.summary.gap_p99 * 1000:6.0f} ms   "
            f"{alone.summary.errors_text()}",
            ("misses too: " + "; ".join(shortfalls) + " — the rig's limit as much as the gateway's")
            if shortfalls
            else "meets them: the gateway's limit",
        )
        report.note("simulator alone, " + alone.cores_text())
    if stopped:
        report.note(f"the search stopped early: {stopped}")
