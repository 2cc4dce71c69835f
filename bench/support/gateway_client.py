"""The client side of bench_gateway.py: raw aiohttp streaming reads, timed as the bytes arrive.

Not the `anthropic` SDK: it builds a pydantic object per SSE event, which at
100 concurrent streams makes the client, not the gateway, the bottleneck, and
adds its own parsing time to every latency.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from pathlib import Path

import aiohttp
import orjson

from bench.support.processes import API_KEY, SimulatorProcess

# What marks text in a reply: a Claude text delta from the gateway, a text frame from the simulator.
GATEWAY_TEXT = b'"text_delta"'
UPSTREAM_TEXT = b"assistantResponseEvent"
# The request headers the gateway sends upstream, which a direct call repeats.
UPSTREAM_HEADERS = ("Content-Type", "X-Amz-Target", "x-amzn-codewhisperer-optout", "User-Agent", "Authorization")


@dataclasses.dataclass(frozen=True)
class Target:
    """One way to get a streamed reply: through the gateway, or straight from the simulator."""

    name: str
    url: str
    headers: dict[str, str]
    body: bytes
    text_marker: bytes


@dataclasses.dataclass
class StreamResult:
    started: float  # seconds after its wave began
    ttft: float | None = None  # seconds from sending the request to the first read carrying text
    max_gap: float = 0.0  # the longest wait between two consecutive reads carrying text
    texts: int = 0  # text deltas (gateway) or text frames (simulator) received
    error: str | None = None


def gateway_target(base_url: str, body: bytes) -> Target:
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    return Target("gateway", base_url + "/v1/messages", headers, body, GATEWAY_TEXT)


async def stream_once(session: aiohttp.ClientSession, target: Target, wave_start: float = 0.0) -> StreamResult:
    started = time.perf_counter()
    result = StreamResult(started=started - wave_start)
    marker = target.text_marker
    keep = len(marker) - 1
    async with session.post(target.url, data=target.body, headers=target.headers) as response:
        if response.status != 200:
            result.error = f"HTTP {response.status}: {(await response.read())[:200]!r}"
            return result
        tail = b""
        last = 0.0
        while True:
            data = await response.content.readany()
            if not data:
                break
            now = time.perf_counter()
            # A marker may straddle two reads: search the previous read's tail too.
            window = tail + data
            found = window.count(marker)
            tail = window[-keep:]
            if found:
                if result.ttft is None:
                    result.ttft = now - started
                else:
                    result.max_gap = max(result.max_gap, now - last)
                last = now
                result.texts += found
            if b"event: error" in window:
                result.error = "an SSE error event"
    if result.ttft is None and result.error is None:
        result.error = "no text in the reply"
    return result


async def checked(session: aiohttp.ClientSession, target: Target) -> StreamResult:
    result = await stream_once(session, target)
    if result.error:
        raise RuntimeError(f"a benchmark request to the {target.name} failed: {result.error}")
    return result


async def direct_twin(session: aiohttp.ClientSession, sim: SimulatorProcess, gateway: Target, scratch: Path) -> Target:
    """The simulator-only twin of a gateway target: the very bytes and headers the gateway sent upstream."""
    await checked(session, gateway)
    capture = scratch / "captured.json"
    sim.command("capture", path=str(capture))
    captured = orjson.loads(capture.read_bytes())
    headers = {key: value for key, value in captured["headers"].items() if key in UPSTREAM_HEADERS}
    return Target("simulator", sim.url, headers, base64.b64decode(captured["body"]), UPSTREAM_TEXT)


async def wave(session: aiohttp.ClientSession, target: Target, streams: int, interval: float) -> list[StreamResult]:
    """`streams` requests, one every `interval` seconds (0: all at once); waits for all of them."""
    begin = time.perf_counter()
    tasks = []
    for index in range(streams):
        delay = begin + index * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(stream_once(session, target, begin)))
    return list(await asyncio.gather(*tasks))
