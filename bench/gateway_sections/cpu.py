"""Section cpu: gateway CPU per 200-chunk streamed reply, absolute and as a multiple of the simulator's own.

CPU time is the gateway process's utime + stime from /proc over N requests
(10 ms ticks, so N is large), divided by N; the simulator's is read the same
way over the same requests — it produced every chunk the gateway relayed, so
gateway/simulator says how much dearer relaying a chunk is than producing it.

"Back to back": the simulator writes the chunks without pause, reads batch
several frames (target: absolute). "Paced": chunks 5 ms apart, so every chunk
is its own upstream read and its own SSE write — the realistic and the
expensive case (target: the ratio).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from bench.gateway_sections.rig import Rig
from bench.support import targets
from bench.support.lean_client import batch, checked
from bench.support.proc_stats import ForeignLoad


@dataclasses.dataclass(frozen=True)
class CpuFigures:
    gateway: float  # CPU-seconds per reply
    simulator: float
    client: float
    elapsed: float
    texts: float  # text deltas per reply, on average
    failed: int
    first_error: str | None

    @property
    def ratio(self) -> float:
        return self.gateway / self.simulator if self.simulator else float("inf")


async def measure(rig: Rig, kind: str, requests: int, chunks: int, delay: float) -> CpuFigures:
    assert rig.gateway is not None
    gateway, sim = rig.gateway, rig.sim
    sim.reply(chunks, delay)
    target = rig.gateway_target(kind)
    for _ in range(3):
        await checked(target)
    await asyncio.sleep(0.1)
    gateway_before, sim_before, client_before = gateway.cpu(), sim.cpu(), time.process_time()
    started = time.monotonic()
    # The gateway merges the frames that arrive in one read into one delta (back to back, or when it
    # lags behind paced chunks): a reply owes at least one text, and how many it had is printed.
    results = await batch(target, requests, rig.args.cpu_concurrency, 1)
    elapsed = time.monotonic() - started
    await asyncio.sleep(0.1)  # the gateway's own end-of-request work (closing, logging) counts too
    good = [result for result in results if not result.error]
    return CpuFigures(
        gateway=(gateway.cpu() - gateway_before) / requests,
        simulator=(sim.cpu() - sim_before) / requests,
        client=(time.process_time() - client_before) / requests,
        elapsed=elapsed,
        texts=sum(result.texts for result in good) / max(len(good), 1),
        failed=len(results) - len(good),
        first_error=next((result.error for result in results if result.error), None),
    )


def _figures_text(figures: CpuFigures, chunks: int) -> str:
    return (
        f"{figures.gateway * 1000:6.2f} ms/reply = {figures.gateway / chunks * 1e6:5.1f} µs/chunk; "
        f"simulator {figures.simulator * 1000:5.2f} ms/reply; gateway/simulator {figures.ratio:4.2f}x"
    )


def _note(rig: Rig, figures: CpuFigures, requests: int) -> None:
    text = (
        f"client {figures.client * 1000:.2f} ms/reply; {requests} replies, {rig.args.cpu_concurrency} at a time, "
        f"in {figures.elapsed:.1f} s; {figures.texts:.0f} text deltas per reply"
    )
    if figures.failed:
        text += f"; {figures.failed} FAILED, the first: {figures.first_error}"
    rig.report.note(text)


async def run(rig: Rig) -> None:
    args = rig.args
    await rig.use_gateway(1)
    report = rig.report
    chunks = targets.CPU_CHUNKS
    report.section(
        f"2. Gateway CPU per {chunks}-chunk streamed reply (cpu): /proc utime+stime, tiny requests, one worker"
    )
    load = ForeignLoad()

    back_to_back = await measure(rig, "tiny", args.cpu_requests_back_to_back, chunks, 0.0)
    report.judge(
        "chunks back to back",
        _figures_text(back_to_back, chunks),
        f"CPU per {chunks}-chunk reply, back to back <= {targets.CPU_BACK_TO_BACK * 1000:g} ms",
        back_to_back.gateway,
        targets.CPU_BACK_TO_BACK,
    )
    _note(rig, back_to_back, args.cpu_requests_back_to_back)

    delay = targets.CPU_PACED_DELAY
    paced = await measure(rig, "tiny", args.cpu_requests_paced, chunks, delay)
    report.judge(
        f"chunks {delay * 1000:g} ms apart",
        _figures_text(paced, chunks),
        f"CPU per {chunks}-chunk reply, paced <= {targets.CPU_PACED_RATIO:g}x the simulator's",
        paced.ratio,
        targets.CPU_PACED_RATIO,
    )
    _note(rig, paced, args.cpu_requests_paced)

    agent_requests = max(args.cpu_requests_paced // 4, 10)
    agent = await measure(rig, "agent", agent_requests, chunks, delay)
    report.row(
        f"{rig.agent_label} request, chunks {delay * 1000:g} ms apart",
        _figures_text(agent, chunks),
        "(for information: + parsing and converting the request)",
    )
    _note(rig, agent, agent_requests)
    report.note(load.describe())
