"""How long the gateway's own work held its event loop, apart from the machine's: a probe inside the gateway.

On a shared machine a stream's gap is mostly the machine's (the loop thread runnable but waiting for
a CPU). The probe tells the two apart from inside the worker: a task on the loop sleeps 1 ms at a time;
each wake-up's lateness, less what the loop thread spent waiting for a CPU meanwhile (the run-queue
delay of /proc/self/task/<tid>/schedstat), is time the loop was held by the process itself — its own
callbacks, or the GIL held by another of its threads (the body preparation's). Lateness and run-queue
delay are sampled over the same span, so what remains is the process's share, whatever the load. One
part of it is still the machine's: a thread descheduled while it holds the GIL holds the loop too;
less the other threads' run-queue wait as well, the figure is a lower bound of the process's own share.

Installed by bench/launch_checkout.py when `LOOP_PROBE_FILE` is set (bench_big_turns.py sets it and
starts every gateway through that launcher); idle until SIGUSR1, which starts a window, and SIGUSR2,
which ends it and writes the window's figures (JSON) to `LOOP_PROBE_FILE`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

INTERVAL = 0.001


def _others_run_delay(tid: int) -> float:
    """The run-queue delay of this process's threads but `tid`, summed."""
    total = 0.0
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/task"):
            if int(name) != tid:
                total += _run_delay(int(name))
    return total


def _run_delay(tid: int) -> float:
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[1]) / 1e9
    return 0.0


class LoopProbe:
    def __init__(self, output: Path) -> None:
        self._output = output
        self._task: asyncio.Task[None] | None = None
        self._held: list[float] = []
        self._held_lower: list[float] = []
        self._waited = 0.0
        self._began = 0.0

    def start(self) -> None:
        if self._task is None:
            self._held, self._held_lower, self._waited, self._began = [], [], 0.0, time.monotonic()
            self._task = asyncio.get_running_loop().create_task(self._sample())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        figures = {
            "seconds": time.monotonic() - self._began,
            "samples": len(self._held),
            "run_queue_wait": self._waited,
        }
        for name, values in (("held", sorted(self._held)), ("held_lower", sorted(self._held_lower))):
            figures[f"{name}_p99"] = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))] if values else 0.0
            figures[f"{name}_max"] = values[-1] if values else 0.0
        self._output.write_text(json.dumps(figures))

    async def _sample(self) -> None:
        tid = threading.get_native_id()
        while True:
            before, waited_before = time.monotonic(), _run_delay(tid)
            others_before = _others_run_delay(tid)
            await asyncio.sleep(INTERVAL)
            late = time.monotonic() - before - INTERVAL
            waited = _run_delay(tid) - waited_before
            self._waited += waited
            self._held.append(max(late - waited, 0.0))
            # A thread of ours descheduled while it holds the GIL holds the loop too, for the machine's
            # reason: without the other threads' run-queue wait as well, a lower bound of our own share.
            self._held_lower.append(max(late - waited - (_others_run_delay(tid) - others_before), 0.0))


def install() -> None:
    """When LOOP_PROBE_FILE is set: a probe on the loop uvicorn serves on, driven by SIGUSR1 / SIGUSR2."""
    output = os.environ.get("LOOP_PROBE_FILE")
    if not output:
        return
    import uvicorn.server

    serve = uvicorn.server.Server.serve

    async def serve_with_probe(self: uvicorn.server.Server, *args: object, **kwargs: object) -> None:
        probe = LoopProbe(Path(output))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, probe.start)
        loop.add_signal_handler(signal.SIGUSR2, probe.stop)
        await serve(self, *args, **kwargs)  # type: ignore[arg-type]

    uvicorn.server.Server.serve = serve_with_probe  # type: ignore[method-assign]
