"""Warm upstream connections: a user's next turn after a long idle, with and without the connection kept.

    .venv/bin/python bench/bench_upstream_tls.py [--idle 60] [--rounds 3]

Two gateways (`python -m q2api serve`, as deployed), each on its own simulated Amazon Q speaking TLS on
loopback with a self-signed certificate made here (`cryptography`), which the gateways trust through
`SSL_CERT_FILE`. The simulators keep an idle connection 400 s, as Amazon Q does (it drops silent ones
after 200–400 s, docs/protocol.md#hosts). The gateways differ in one setting only:

* "kept": `Q2API_UPSTREAM_KEEPALIVE_SECONDS=300` (the default);
* "dropped": `Q2API_UPSTREAM_KEEPALIVE_SECONDS=15` (aiohttp's default, what the gateway had before).

Each round: turn 1 on both, `--idle` seconds of silence, turn 2 on both. It prints each turn's time
to first text (client connection opened → first text read, through the gateway) and the TLS
handshakes each turn cost (new connections the simulator accepted: without session resumption, one
connection is one full handshake). Loopback hides the network: a handshake here costs what its crypto
costs (a few ms), not the ≈340 ms round trips cost against the real service (docs/protocol.md#hosts),
so the handshake count is the figure that carries over.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.processes import API_KEY, GatewayProcess
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.tls import SSLContext, self_signed_certificate, server_context

KEPT, DROPPED = 300.0, 15.0
SERVER_IDLE_DROP = 400.0  # the simulator closes a connection silent this long (Amazon Q: 200–400 s)
MODEL = "claude-sonnet-5-5"


class Side:
    """One gateway and its own simulator."""

    def __init__(self, name: str, keepalive: float, sim: SimulatedUpstream, gateway: GatewayProcess) -> None:
        self.name = name
        self.keepalive = keepalive
        self.sim = sim
        self.gateway = gateway
        self.ttft: dict[int, list[float]] = {1: [], 2: []}
        self.handshakes: dict[int, list[int]] = {1: [], 2: []}

    async def turn(self, number: int) -> None:
        before = len(self.sim.connections_seen)
        self.ttft[number].append(await first_text(self.gateway.port))
        self.handshakes[number].append(len(self.sim.connections_seen) - before)


async def first_text(port: int) -> float:
    """Seconds from opening a connection to the gateway to reading the first text of a streamed reply."""
    body = orjson.dumps(
        {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "next turn"}]}
    )
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nx-api-key: {API_KEY}\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        seen = b""
        while b"text_delta" not in seen:
            chunk = await asyncio.wait_for(reader.read(65536), 30)
            if not chunk:
                raise RuntimeError(f"the gateway closed without text: {seen[:300]!r}")
            seen += chunk
        return time.perf_counter() - started
    finally:
        writer.close()


async def open_side(name: str, keepalive: float, server_tls: SSLContext, cert: Path, root: Path) -> Side:
    sim = await SimulatedUpstream(ssl_context=server_tls, keepalive_timeout=SERVER_IDLE_DROP).start()
    sim.responder = lambda record: scripts.text_reply("Hello from the next turn", chunks=4)
    gateway = GatewayProcess(
        sim.env(),
        root / name,
        "WARNING",
        None,
        extra_env={"SSL_CERT_FILE": str(cert), "Q2API_UPSTREAM_KEEPALIVE_SECONDS": str(keepalive)},
    )
    await gateway.wait_ready()
    return Side(name, keepalive, sim, gateway)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of silence between the two turns")
    parser.add_argument("--rounds", type=int, default=3, help="turn-1 / idle / turn-2 rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="q2api-bench-tls-") as scratch:
        root = Path(scratch)
        cert, key = self_signed_certificate(root)
        server_tls = server_context(cert, key)
        sides = [
            await open_side("kept", KEPT, server_tls, cert, root),
            await open_side("dropped", DROPPED, server_tls, cert, root),
        ]
        try:
            for side in sides:  # a first request logs the account in (token refresh) and warms the gateway
                await first_text(side.gateway.port)
            for round_ in range(args.rounds):
                print(f"round {round_ + 1}/{args.rounds}: turn 1, {args.idle:g} s idle, turn 2", flush=True)
                for side in sides:
                    await side.turn(1)
                await asyncio.sleep(args.idle)
                for side in sides:
                    await side.turn(2)
        finally:
            for side in sides:
                side.gateway.stop()
                await side.sim.stop()
    print()
    print(f"TLS upstream on loopback, {args.rounds} rounds, {args.idle:g} s idle between the turns")
    print(f"{'gateway':<34} {'turn 1 TTFT':>13} {'turn 2 TTFT':>13} {'handshakes t1':>14} {'handshakes t2':>14}")
    for side in sides:
        label = f"{side.name} (keepalive {side.keepalive:g} s)"
        print(
            f"{label:<34} {ms(statistics.median(side.ttft[1])):>13} {ms(statistics.median(side.ttft[2])):>13} "
            f"{sum(side.handshakes[1]):>14} {sum(side.handshakes[2]):>14}"
        )
    kept, dropped = sides
    print(
        f"turn 2 after the idle: {sum(kept.handshakes[2])} new TLS connection(s) kept vs "
        f"{sum(dropped.handshakes[2])} dropped; median TTFT "
        f"{ms(statistics.median(dropped.ttft[2]) - statistics.median(kept.ttft[2])).strip()} more without reuse"
    )


if __name__ == "__main__":
    asyncio.run(main())
