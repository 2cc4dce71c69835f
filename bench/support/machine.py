"""The machine a benchmark runs on, as printed in its header, and the one limit it raises.

Figures from a small shared machine only mean something next to what it was:
the CPU model and cores, the kernel, the Python and event-loop versions, the
load average when the run started.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import resource
from pathlib import Path


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _sysctl(name: str) -> str:
    try:
        return " ".join(Path("/proc/sys/" + name.replace(".", "/")).read_text().split())
    except OSError:
        return "?"


def raise_open_file_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit, for this process and the children it starts from now on.

    Every stream holds a socket in the client and one in the simulator, and two
    in the gateway (the client's and the upstream one): thousands of streams
    need more than the usual soft limit of 1024.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def describe() -> list[str]:
    """The header lines: hardware, software, limits and load."""
    usable = len(os.sched_getaffinity(0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    versions = ", ".join(
        f"{name} {package_version(name)}" for name in ("uvicorn", "uvloop", "httptools", "aiohttp", "starlette")
    )
    load1, load5, load15 = os.getloadavg()
    return [
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs ({usable} usable here), "
        f"kernel {platform.release()}, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GB RAM",
        f"software: Python {platform.python_version()} ({platform.python_implementation()}), {versions}",
        f"limits: open files {soft}/{hard}, somaxconn {_sysctl('net.core.somaxconn')}, "
        f"tcp_max_syn_backlog {_sysctl('net.ipv4.tcp_max_syn_backlog')}, "
        f"ephemeral ports {_sysctl('net.ipv4.ip_local_port_range').replace(' ', '-')}",
        f"load average at the start: {load1:.2f} {load5:.2f} {load15:.2f}",
    ]
