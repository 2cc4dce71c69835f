"""The targets of issue 33 ("Claude Code's real request sizes at the cost they must have"), in one place.

bench_big_turns.py's verdicts and BENCHMARKS.md quote these; a figure is met at or under its target.
"""

from __future__ import annotations

# Item 1: time to first token added over the simulator alone, for the same upstream body (median).
TTFT_ADDED = {"1mb": 0.005, "2mb": 0.010}
# Item 1: the gateway's CPU (utime + stime) per MB of request body, at every size (linear in size).
CPU_PER_MB = 0.006

# Item 2: while 1 MB bodies arrive four at a time, other streams do not feel them.
LOOP_BURST = 4  # 1 MB bodies started together
LOOP_TINY_TTFT_P99 = 0.020
LOOP_GAP_P99 = 0.020
LOOP_CHUNKS = 200  # every stream's reply: 200 text chunks 5 ms apart (one second)
LOOP_DELAY = 0.005

# Item 3: memory bounded by what is in flight, per worker.
RSS_PEAK_MB = {("1mb", 50): 200.0, ("2mb", 100): 400.0}
RSS_SETTLED_RATIO = 1.10  # a minute after the load: within 10 % of idle
RSS_SETTLE_SECONDS = 60.0
RSS_IDLE_MB = 60.0
MEMORY_CHUNKS = 50  # every stream's reply: 50 chunks 100 ms apart, so the wave's streams are all open together
MEMORY_DELAY = 0.100
