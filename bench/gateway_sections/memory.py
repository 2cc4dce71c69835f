"""Section memory: the gateway worker's RSS idle, at 100 concurrent 200 KB agent streams, and after 10,000 requests.

Idle: VmRSS after start-up and a warm-up of a few requests (the first fetches
the access token). Flat: VmRSS once the gateway has gone quiet after a warm-up
of requests, then again after 10,000 more (short replies, many at a time): the
growth — measured before the big requests, whose freed memory the allocator
keeps and which would hide a slow leak. Peak: the largest VmRSS sampled every
10 ms during the streams, and VmHWM after resetting it (clear_refs), whichever
is larger.
"""

from __future__ import annotations

import time

from bench.gateway_sections.rig import SHORT_REPLY_CHUNKS, Rig
from bench.support import targets
from bench.support.lean_client import StreamResult, batch
from bench.support.proc_stats import ForeignLoad, RssSampler, open_fds


async def run(rig: Rig) -> None:
    args = rig.args
    gateway = await rig.use_gateway(1)
    report = rig.report
    report.section("4. Gateway memory, one worker (memory): VmRSS and VmHWM from /proc")
    load = ForeignLoad()

    idle = max(rig.idle_rss[1])
    report.judge(
        "idle after start-up and warm-up",
        f"{idle:6.1f} MB",
        f"RSS idle per worker <= {targets.RSS_IDLE_MB:g} MB",
        idle,
        targets.RSS_IDLE_MB,
    )
    report.note(f"just after start-up {max(rig.started_rss[1]):.1f} MB")

    rig.sim.reply(SHORT_REPLY_CHUNKS)
    tiny = rig.gateway_target("tiny")
    warmup = await batch(tiny, args.flat_warmup, args.flat_concurrency, 1)
    await gateway.settle()
    settled_rss, settled_fds = gateway.rss_mb(), open_fds(gateway.pid)
    client_before, started = time.process_time(), time.monotonic()
    results = await batch(tiny, args.flat_requests, args.flat_concurrency, 1)
    elapsed, client_cpu = time.monotonic() - started, time.process_time() - client_before
    await gateway.settle()
    after_rss, after_fds = gateway.rss_mb(), open_fds(gateway.pid)
    growth = after_rss - settled_rss
    report.judge(
        f"growth over {args.flat_requests} requests",
        f"{growth:+6.1f} MB ({settled_rss:.1f} -> {after_rss:.1f} MB)",
        f"RSS flat after {targets.FLAT_REQUESTS} requests: growth <= {targets.RSS_GROWTH_MB:g} MB",
        growth,
        targets.RSS_GROWTH_MB,
    )
    failed = _failed(warmup) + _failed(results)
    report.note(
        f"after a warm-up of {args.flat_warmup}; {args.flat_concurrency} at a time, {SHORT_REPLY_CHUNKS}-chunk "
        f"replies, {len(results) / elapsed:.0f} requests/s, client {client_cpu / len(results) * 1e6:.0f} µs/request; "
        f"open descriptors {settled_fds} -> {after_fds}" + (f"; {failed} requests FAILED" if failed else "")
    )
    if args.flat_requests != targets.FLAT_REQUESTS:
        report.note(f"the target is over {targets.FLAT_REQUESTS} requests; --flat-requests {args.flat_requests}")

    streams = targets.BURST_STREAMS
    before = gateway.rss_mb()
    hwm_reset = gateway.reset_hwm()
    with RssSampler(gateway.worker_pids) as sampler:
        record = await rig.wave(rig.gateway_target("agent"), streams, targets.BURST_CHUNKS, targets.BURST_DELAY)
    hwm = gateway.hwm_mb()
    peak = max(sampler.peak_mb, hwm) if hwm_reset else sampler.peak_mb
    report.judge(
        f"peak at {streams} concurrent {rig.agent_label} streams",
        f"{peak:6.1f} MB",
        f"RSS at {streams} concurrent {targets.AGENT_REQUEST_KB} KB agent streams <= {targets.RSS_AGENT_STREAMS_MB:g} MB",
        peak,
        targets.RSS_AGENT_STREAMS_MB,
    )
    report.note(
        f"VmRSS sampled {sampler.samples}x, max {sampler.peak_mb:.1f} MB; "
        + (f"VmHWM {hwm:.1f} MB; " if hwm_reset else "VmHWM could not be reset; ")
        + f"{before:.1f} MB before, {gateway.rss_mb():.1f} MB after; {record.summary.errors_text()}"
    )
    report.note(load.describe())


def _failed(results: list[StreamResult]) -> int:
    return sum(1 for result in results if result.error)
