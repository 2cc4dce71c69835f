"""Client processes for waves of many streams, so that the load generator is not what is measured.

One process of Python, however lean, spends a few hundred microseconds of CPU
per stream started: at a thousand streams started together that is a queue of
its own. The pool keeps `processes` client processes (each with its own
uvloop) ready; a wave is shared among them — process k starts streams k,
k+n, k+2n… of one schedule with one start time — and their results and CPU
time are gathered. Small waves use one process: starting two for 100 streams
would only take a core from the gateway on a small machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import multiprocessing
import multiprocessing.connection
import os
import time

from bench.support.lean_client import StreamResult, Target, wave
from bench.support.machine import raise_open_file_limit

# Waves smaller than this are run by one client process.
SPLIT_FROM = 500
# Time given to every process to receive its share before the wave starts.
START_MARGIN = 0.2


@dataclasses.dataclass(frozen=True)
class WaveJob:
    target: Target
    streams: int  # this process's share
    first: int
    stride: int
    interval: float
    expected_texts: int
    begin: float  # time.monotonic() of the wave's start, the same in every process
    timeout: float


@dataclasses.dataclass(frozen=True)
class WaveOutcome:
    results: list[StreamResult]
    client_cpu: float  # CPU-seconds the client processes used for the wave
    wall: float  # seconds from the wave's start to its last stream's end
    processes: int


def _run_jobs(connection: multiprocessing.connection.Connection) -> None:
    import uvloop

    raise_open_file_limit()
    while True:
        job = connection.recv()
        if job is None:
            return
        cpu = time.process_time()
        # The client's own collections would pause all its streams at once and show as gaps.
        gc.disable()
        try:
            results = uvloop.run(
                wave(
                    job.target,
                    job.streams,
                    job.interval,
                    job.expected_texts,
                    job.begin,
                    job.first,
                    job.stride,
                    job.timeout,
                )
            )
        finally:
            gc.enable()
        connection.send((results, time.process_time() - cpu))
        del results
        gc.collect()


class ClientPool:
    def __init__(self, processes: int, cpu: int | None = None) -> None:
        # Spawned, not forked: a fresh interpreter, no copy of the benchmark's loop or sockets.
        context = multiprocessing.get_context("spawn")
        self._connections: list[multiprocessing.connection.Connection] = []
        self._processes = []
        for _ in range(max(processes, 1)):
            ours, theirs = context.Pipe()
            process = context.Process(target=_run_jobs, args=(theirs,), daemon=True)
            process.start()
            if cpu is not None and process.pid is not None:
                os.sched_setaffinity(process.pid, {cpu})
            self._connections.append(ours)
            self._processes.append(process)

    @property
    def size(self) -> int:
        return len(self._processes)

    def pids(self) -> list[int]:
        return [process.pid for process in self._processes if process.pid is not None]

    def wave(
        self,
        target: Target,
        streams: int,
        interval: float,
        expected_texts: int,
        timeout: float = 120.0,
        begin: float | None = None,
    ) -> WaveOutcome:
        """A wave of `streams` streams, one every `interval` s (0: all at once); blocks until all have ended.
        `begin`: when the first starts (time.monotonic()), to line the wave up with another one."""
        used = self._connections[: 1 if streams < SPLIT_FROM else self.size]
        begin = time.monotonic() + START_MARGIN if begin is None else begin
        for index, connection in enumerate(used):
            share = len(range(index, streams, len(used)))
            connection.send(WaveJob(target, share, index, len(used), interval, expected_texts, begin, timeout))
        results: list[StreamResult] = []
        client_cpu = 0.0
        for connection in used:
            part, cpu = connection.recv()
            results += part
            client_cpu += cpu
        return WaveOutcome(results, client_cpu, time.monotonic() - begin, len(used))

    def close(self) -> None:
        for connection in self._connections:
            with contextlib.suppress(OSError):
                connection.send(None)
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
