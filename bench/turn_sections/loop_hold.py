"""Section loop: other streams while 1 MB Claude Code bodies arrive four at a time (item 2).

For `--loop-seconds`, two loads at once, both against one target:

- tiny requests, `--loop-rate` a second on an even schedule (client process of the pool): each one's
  TTFT is "a tiny request's TTFT";
- every `--loop-period` seconds, LOOP_BURST (4) streams of the 1 MB workload started together (this
  process): the bodies whose preparation must not hold the others up.

Every stream — tiny and large — gets the same reply, LOOP_CHUNKS text chunks LOOP_DELAY apart (one
second), so that the longest wait between two of its text reads ("gap") shows any stall of the event
loop while it streams: with chunks 5 ms apart, a gap p99 of 20 ms allows 15 ms of stall at the 99th
percentile. Run three times: through the gateway, the same through the simulator alone (the rig's and
the machine's own share), and the gateway with the tiny requests alone (what the bodies add).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path

from bench.gateway_sections.rig import Rig
from bench.support.lean_client import StreamResult, Target, stream_once
from bench.support.proc_stats import ForeignLoad
from bench.support.report import ms
from bench.support.wave_summary import WaveSummary
from bench.turn_sections import targets


async def _bursts(target: Target, bursts: int, period: float, begin: float, timeout: float) -> list[StreamResult]:
    """`bursts` times, every `period` s from `begin`, LOOP_BURST streams of `target` started together."""
    tasks = []
    for index in range(bursts):
        delay = begin + index * period - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks += [asyncio.create_task(stream_once(target, 1, begin, timeout)) for _ in range(targets.LOOP_BURST)]
    return list(await asyncio.gather(*tasks))


def _run_queue_wait(pid: int) -> float:
    """Seconds thread `pid` has waited, runnable, for a CPU (/proc/<pid>/schedstat's second field)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


async def _probe_figures(rig: Rig) -> dict[str, float] | None:
    """The gateway's loop probe's figures for the window just ended (None: the gateway has no probe)."""
    assert rig.gateway is not None
    output = Path(rig.gateway_env["LOOP_PROBE_FILE"])
    output.unlink(missing_ok=True)
    os.kill(rig.gateway.pid, signal.SIGUSR2)
    for _ in range(50):
        await asyncio.sleep(0.02)
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(output.read_text()))
    return None


async def _load(
    rig: Rig, tiny: Target, large: Target | None
) -> tuple[WaveSummary, WaveSummary | None, float, float, dict[str, float] | None]:
    """The tiny requests' summary, the large ones' (None without them), the cores others used meanwhile, and
    how long the gateway's event loop thread waited for a CPU, per second of the load (the machine's share
    of the gaps: a loop that is runnable but not running is not held by the gateway's own work)."""
    args = rig.args
    assert rig.gateway is not None
    waited, began = _run_queue_wait(rig.gateway.pid), time.monotonic()
    os.kill(rig.gateway.pid, signal.SIGUSR1)  # the gateway's loop probe (bench/support/loop_probe.py) starts
    tiny_streams = round(args.loop_seconds * args.loop_rate)
    timeout = args.loop_seconds + targets.LOOP_CHUNKS * targets.LOOP_DELAY + 60.0
    load = ForeignLoad()
    with rig.sim.collector_paused():
        tiny_wave = asyncio.to_thread(rig.pool.wave, tiny, tiny_streams, 1.0 / args.loop_rate, 1, timeout)
        if large is None:
            outcome, large_results = await tiny_wave, None
        else:
            bursts = max(1, round(args.loop_seconds / args.loop_period))
            outcome, large_results = await asyncio.gather(
                tiny_wave, _bursts(large, bursts, args.loop_period, time.monotonic() + 0.2, timeout)
            )
    others, _steal, _ours = load.cores()
    waited = (_run_queue_wait(rig.gateway.pid) - waited) / (time.monotonic() - began)
    probe = await _probe_figures(rig)
    await rig.gateway.settle()
    large_summary = WaveSummary.of(large_results) if large_results is not None else None
    return WaveSummary.of(outcome.results), large_summary, others, waited, probe


async def run(rig: Rig) -> None:
    args = rig.args
    await rig.use_gateway(1)
    report = rig.report
    report.section(
        f"2. The loop while 1 MB bodies arrive {targets.LOOP_BURST} at a time (loop): {args.loop_seconds:g} s, tiny "
        f"requests {args.loop_rate:g}/s, {targets.LOOP_BURST} x 1 MB every {args.loop_period:g} s, every reply "
        f"{targets.LOOP_CHUNKS} chunks {targets.LOOP_DELAY * 1000:g} ms apart, one worker"
    )
    rig.sim.reply(targets.LOOP_CHUNKS, targets.LOOP_DELAY)
    runs = {
        "gateway": (rig.gateway_target("tiny"), rig.gateway_target("1mb")),
        "simulator alone": (rig.direct_target("tiny"), rig.direct_target("1mb")),
        "gateway, tiny alone": (rig.gateway_target("tiny"), None),
    }
    for name, (tiny, large) in runs.items():
        tiny_summary, large_summary, others, waited, probe = await _load(rig, tiny, large)
        gap_p99 = tiny_summary.gap_p99 if large_summary is None else max(tiny_summary.gap_p99, large_summary.gap_p99)
        figure = f"tiny TTFT p50 {ms(tiny_summary.ttft_p50)} p99 {ms(tiny_summary.ttft_p99)}; gap p99 {ms(gap_p99)}"
        if probe is not None and name != "simulator alone":
            report.row(
                f"{name}: loop held by the gateway itself",
                f"p99 {probe['held_p99'] * 1000:6.2f} ms   max {probe['held_max'] * 1000:6.2f} ms; less the other "
                f"threads' run-queue wait too: p99 {probe['held_lower_p99'] * 1000:.2f}, max "
                f"{probe['held_lower_max'] * 1000:.2f} ms ({probe['samples']:.0f} samples of a 1 ms probe)",
            )
        if name == "gateway":
            report.judge(
                f"{name}: tiny TTFT p99",
                figure,
                f"tiny TTFT p99 while 1 MB bodies arrive <= {targets.LOOP_TINY_TTFT_P99 * 1000:g} ms",
                tiny_summary.ttft_p99,
                targets.LOOP_TINY_TTFT_P99,
            )
            report.judge(
                f"{name}: every stream's gap p99",
                f"tiny {ms(tiny_summary.gap_p99)}, 1 MB {ms(large_summary.gap_p99 if large_summary else 0.0)}",
                f"gap p99 while 1 MB bodies arrive <= {targets.LOOP_GAP_P99 * 1000:g} ms",
                gap_p99,
                targets.LOOP_GAP_P99,
            )
        else:
            report.row(name, figure)
        text = f"{name}: tiny {tiny_summary.streams} streams, {tiny_summary.errors_text()}"
        if large_summary is not None:
            text += (
                f"; 1 MB {large_summary.streams} streams, TTFT p50 {ms(large_summary.ttft_p50).strip()} "
                f"p99 {ms(large_summary.ttft_p99).strip()}, {large_summary.errors_text()}"
            )
        report.note(
            text + f"; other processes {others:.2f} cores; the gateway's loop thread waited for a CPU "
            f"{waited * 1000:.0f} ms per second; load average {os.getloadavg()[0]:.2f}"
        )
