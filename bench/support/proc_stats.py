"""What /proc says about the benchmark's processes: CPU time, memory, children, and the rest of the machine.

Read from outside, so the figures of the gateway are not mixed with the
client's or the simulator's, and no instrumentation runs inside the gateway.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a whole process (all its threads), from /proc/<pid>/stat."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of proc(5)


def children(pid: int) -> list[int]:
    """The live children of `pid` (every thread's list: a child belongs to the thread that started it)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def tree_cpu_seconds(root: int) -> float:
    """CPU time of `root` and every process below it, including those that have exited since.

    A child that exits and is waited for adds its time to its parent's cutime and
    cstime (fields 16 and 17), so a gateway restarted between two readings is still
    counted as ours and not as another engineer's load.
    """
    total = 0.0
    pending = [root]
    while pending:
        pid = pending.pop()
        with contextlib.suppress(OSError, IndexError):
            fields = _stat_fields(pid)
            total += sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
            pending += children(pid)
    return total


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def rss_mb(pid: int) -> float:
    return status_kb(pid, "VmRSS") / 1024


def hwm_mb(pid: int) -> float:
    """VmHWM: the highest RSS since the process started, or since `reset_hwm`."""
    return status_kb(pid, "VmHWM") / 1024


def reset_hwm(pid: int) -> bool:
    """Set VmHWM back to the current RSS (proc(5), clear_refs value 5); False where that is not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class RssSampler:
    """The largest VmRSS of some processes, read every `interval` seconds from a thread."""

    def __init__(self, pids: Callable[[], list[int]], interval: float = 0.01) -> None:
        self._pids = pids
        self._interval = interval
        self._stop = threading.Event()
        self.peak_mb = 0.0
        self.samples = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._pids():
                with contextlib.suppress(OSError, KeyError):
                    self.peak_mb = max(self.peak_mb, rss_mb(pid))
            self.samples += 1
            self._stop.wait(self._interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


class PeakRate:
    """The highest rate of a cumulative count (CPU-seconds: cores) over windows of `window` seconds, from a thread.

    An average over a whole wave hides the second in which a thousand streams
    arrive; the busiest window shows whether a process, or the machine, was
    saturated then.
    """

    def __init__(self, counters: dict[str, Callable[[], float]], window: float = 0.1) -> None:
        self._counters = counters
        self._window = window
        self._stop = threading.Event()
        self.peaks = dict.fromkeys(counters, 0.0)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> dict[str, float]:
        values = {}
        for name, counter in self._counters.items():
            with contextlib.suppress(OSError, IndexError, ValueError):
                values[name] = counter()
        return values

    def _run(self) -> None:
        before, then = self._read(), time.monotonic()
        while not self._stop.wait(self._window):
            now_values, now = self._read(), time.monotonic()
            for name, value in now_values.items():
                if name in before:
                    self.peaks[name] = max(self.peaks[name], (value - before[name]) / (now - then))
            before, then = now_values, now

    def __enter__(self) -> PeakRate:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, steal) CPU-seconds of the whole machine so far, from /proc/stat."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq) / CLOCK_TICKS, steal / CLOCK_TICKS


class ForeignLoad:
    """How many cores processes other than ours used over a span: the noise on a shared machine.

    "Ours" is this benchmark and every process below it: the gateway and its
    workers, the simulator, the client processes.
    """

    def __init__(self, root: int | None = None) -> None:
        self._root = root or os.getpid()
        self._start = self._snapshot()

    def _snapshot(self) -> tuple[float, float, float, float]:
        busy, steal = machine_busy_seconds()
        return time.monotonic(), busy, steal, tree_cpu_seconds(self._root)

    def restart(self) -> None:
        self._start = self._snapshot()

    def cores(self) -> tuple[float, float, float]:
        """(cores used by other processes, stolen by the hypervisor, used by ours) since the start."""
        now = self._snapshot()
        wall = max(now[0] - self._start[0], 1e-9)
        ours = now[3] - self._start[3]
        foreign = (now[1] - self._start[1]) - ours
        return max(foreign, 0.0) / wall, (now[2] - self._start[2]) / wall, ours / wall

    def describe(self) -> str:
        others, steal, ours = self.cores()
        text = f"meanwhile other processes on this machine used {others:.2f} cores (ours {ours:.2f})"
        if steal >= 0.01:
            text += f", the hypervisor stole {steal:.2f}"
        return text + f"; load average {os.getloadavg()[0]:.2f}"
