"""Speed of the offline token estimator.

    python bench/bench_token_count.py [--runs 300]

Prints median and p90 of `estimate_request_tokens` on Claude Code-shaped requests
(tests/support/claude_code_request.py) of several sizes, and of `estimate_text_tokens` on
short streamed deltas and on one long string.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from q2api.anthropic.token_count import estimate_request_tokens, estimate_text_tokens
from q2api.anthropic.types import parse_messages_request
from tests.support.claude_code_request import claude_code_request


def measure(func: Callable[[], object], runs: int) -> tuple[float, float]:
    func()  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def report(label: str, func: Callable[[], object], runs: int) -> None:
    median, p90 = measure(func, runs)
    print(f"{label:<52} median {median * 1e6:9.1f} µs   p90 {p90 * 1e6:9.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()

    print(f"Python {sys.version.split()[0]}, {args.runs} runs each")
    for size_kb in (60, 200, 1000):
        body = orjson.dumps(claude_code_request(size_kb=size_kb))
        request = parse_messages_request(body)
        tokens = estimate_request_tokens(request)
        label = f"estimate_request_tokens, {len(body) / 1024:.0f} KB request ({tokens} tok)"
        report(label, lambda request=request: estimate_request_tokens(request), args.runs)

    delta = "Let me check the test output"
    report(f"estimate_text_tokens, {len(delta)}-char delta", lambda: estimate_text_tokens(delta), args.runs * 20)
    cjk = "这段代码在运行测试的时候报错了"
    report(f"estimate_text_tokens, {len(cjk)}-char CJK delta", lambda: estimate_text_tokens(cjk), args.runs * 20)
    long_text = (ROOT / "q2api/anthropic/types.py").read_text() * 20
    report(
        f"estimate_text_tokens, {len(long_text) // 1024} KB string",
        lambda: estimate_text_tokens(long_text),
        args.runs,
    )


if __name__ == "__main__":
    main()
