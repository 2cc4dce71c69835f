"""The simulated Amazon Q upstream as its own process, steered over stdin (a helper of bench_gateway.py).

    .venv/bin/python bench/support/simulator_process.py

Prints `READY <port>` once listening, then answers each stdin line (a JSON
command) with one stdout line:

  {"cmd": "reply", "chunks": 200, "delay": 0.005, "chunk_chars": 16}
      every GenerateAssistantResponse call from now on gets this text reply
      (built once, so the simulator only writes prebuilt bytes) -> "OK"
  {"cmd": "capture", "path": "/tmp/x.json"}
      write the last request's headers and body (base64) to `path` -> "OK"
  {"cmd": "gc", "enabled": false}
      pause the simulator's garbage collector (true: collect, then resume) -> "OK"
  {"cmd": "quit"}

A process of its own keeps the simulator's CPU out of the gateway's and the
client's; the benchmark reads its CPU time from /proc.

Its listen queue is made deeper than SimulatedUpstream's 1024 (see
`deepen_listen_queue`): at a few thousand streams started together the
gateway opens as many upstream connections at once, and an overflowing queue
would delay some by a SYN retry (1 s) — the rig's limit, not the gateway's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import os
import socket
import sys
import threading
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from q2api.testing.scripts import Pause, Send, StreamReply
from q2api.testing.simulated_upstream import SimulatedUpstream

# The listen backlog asked for (the kernel caps it at net.core.somaxconn).
LISTEN_BACKLOG = 65535
WORDS = "the quick brown fox jumps over a lazy dog; code: x = f(y) + 1, done. "


def paced_text_reply(chunks: int, delay: float, chunk_chars: int = 16) -> StreamReply:
    """A text reply of `chunks` frames, `delay` apart, the first text frame sent with the headers.

    Unlike `scripts.text_reply(delay=...)` there is no pause between the
    conversation event and the first text, so time to first text measures the
    path and not the script's first pause.
    """
    texts = [(WORDS * (chunk_chars // len(WORDS) + 2))[(i * 7) % len(WORDS) :][:chunk_chars] for i in range(chunks)]
    text_frames = [scripts.event("assistantResponseEvent", {"content": text}) for text in texts]
    steps: list[Send | Pause] = [scripts.conversation_event(), text_frames[0]]
    for frame in text_frames[1:]:
        if delay:
            steps.append(Pause(delay))
        steps.append(frame)
    steps.append(scripts.usage_event(20, chunks * chunk_chars // 4))
    return StreamReply(tuple(steps))


def deepen_listen_queue(port: int, backlog: int = LISTEN_BACKLOG) -> int:
    """listen() again, with a longer queue, on this process's socket listening on `port`; how many were.

    SimulatedUpstream opens its site with a backlog of 1024 and q2api/testing is
    not the benchmark's to change; Linux lets a listening socket be given a new
    backlog by calling listen() again, found here among the open descriptors.
    """
    deepened = 0
    for name in os.listdir("/proc/self/fd"):
        # fromfd works on a duplicate, which shares the listening socket.
        with (
            contextlib.suppress(OSError, ValueError),
            socket.fromfd(int(name), socket.AF_INET, socket.SOCK_STREAM) as probe,
        ):
            listening = probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            if listening and probe.getsockname()[1] == port:
                probe.listen(backlog)
                deepened += 1
    return deepened


async def serve() -> None:
    sim = SimulatedUpstream()
    await sim.start()
    if not deepen_listen_queue(sim.port):
        print(f"simulator: could not deepen the listen queue of port {sim.port}", file=sys.stderr)
    loop = asyncio.get_running_loop()
    current: dict[str, object] = {"reply": paced_text_reply(5, 0.0), "last": None}

    def respond(record: RecordedRequest) -> StreamReply:
        # Keep only the raw bytes of the last request. Holding the parsed record until the
        # next request would free a 200 KB request's objects inside that next request, on
        # its clock; dropping it here frees it when its own handler ends, after its reply.
        current["last"] = ({str(key): value for key, value in record.headers.items()}, record.raw)
        sim.requests.clear()
        return current["reply"]  # type: ignore[return-value]

    sim.responder = respond
    done = asyncio.Event()

    def run(line: str) -> str:
        command = orjson.loads(line)
        name = command["cmd"]
        if name == "reply":
            current["reply"] = paced_text_reply(
                int(command["chunks"]), float(command.get("delay", 0.0)), int(command.get("chunk_chars", 16))
            )
            return "OK"
        if name == "capture":
            if current["last"] is None:
                return "ERROR no request recorded yet"
            headers, raw = current["last"]  # type: ignore[misc]
            Path(command["path"]).write_bytes(
                orjson.dumps({"headers": headers, "body": base64.b64encode(raw).decode()})
            )
            return "OK"
        if name == "gc":
            # With thousands of streams open, a full collection pauses every one of them at once
            # (up to 100 ms at 3,000): the rig's pause, which would be read as the gateway's gap.
            if command["enabled"]:
                gc.collect()
                gc.enable()
            else:
                gc.disable()
            return "OK"
        if name == "quit":
            done.set()
            return "BYE"
        return f"ERROR unknown command {name!r}"

    def answer(line: str) -> None:
        try:
            reply = run(line)
        except Exception as exc:  # reported to the benchmark, which stops
            reply = f"ERROR {type(exc).__name__}: {exc}"
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()

    def read_commands() -> None:
        # A thread reads stdin so the event loop never blocks on it.
        for line in sys.stdin:
            if line.strip():
                loop.call_soon_threadsafe(answer, line)
        loop.call_soon_threadsafe(done.set)

    threading.Thread(target=read_commands, daemon=True).start()
    print(f"READY {sim.port}", flush=True)
    await done.wait()
    await sim.stop()


def main() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of uvicorn[standard]
        asyncio.run(serve())
    else:
        uvloop.run(serve())


if __name__ == "__main__":
    main()
