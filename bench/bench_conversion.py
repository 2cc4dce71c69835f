"""Benchmark: converting a ~200 KB Claude Code-like request to an Amazon Q body.

    .venv/bin/python bench/bench_conversion.py [--size-kb 200] [--runs 1000]

Prints median and p90 (milliseconds) of:
  convert       convert_request() on an already-parsed request        (target ≤ 1 ms median)
  end-to-end    parse + validate (msgspec) + convert + orjson.dumps    (target ≤ 3 ms median)
and, for information, the guards run by the app on each request.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.conversion.converter import ConversionOptions, convert_request
from q2api.conversion.loop_guard import detect_tool_loops
from q2api.conversion.order_guard import validate_conversation
from q2api.testing.claude_code_request import claude_code_request


def measure(function: Callable[[], object], runs: int) -> tuple[float, float]:
    for _ in range(min(50, runs)):  # warm-up
        function()
    samples = []
    gc.collect()
    for _ in range(runs):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9)]


def tool_session(calls: list[tuple[str, dict[str, Any], str]]) -> MessagesRequest:
    """A request whose conversation is one tool call and its result per round, as an agent sends it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for number, (name, tool_input, result) in enumerate(calls):
        tool_id = f"toolu_{number:05d}"
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]}
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": result}]}
        )
    return parse_messages_request(
        orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages})
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-kb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()

    raw = orjson.dumps(claude_code_request(size_kb=args.size_kb))
    options = ConversionOptions(conversation_id="5f1c6c1e-0000-4000-8000-000000000000")
    request = parse_messages_request(raw)
    payload = convert_request(request, options).payload

    long_session = tool_session([("Read", {"file_path": f"/src/{n}.py"}, f"# {n}\n" + "x" * 4000) for n in range(300)])
    looping_session = tool_session(
        [("Read", {"file_path": f"/src/{n}.py"}, f"# {n}") for n in range(200)]
        + [("Bash", {"command": "git status"}, "nothing to commit")] * 100
    )

    def end_to_end() -> bytes:
        return orjson.dumps(convert_request(parse_messages_request(raw), options).payload)

    print(
        f"request: {len(raw) / 1024:.0f} KB, {len(request.messages)} messages, {len(request.tools or [])} tools; "
        f"Amazon Q body: {len(orjson.dumps(payload)) / 1024:.0f} KB; {args.runs} runs"
    )
    rows = [
        ("convert", lambda: convert_request(request, options), 1.0),
        ("end-to-end (parse+validate+convert+orjson)", end_to_end, 3.0),
        ("parse+validate only", lambda: parse_messages_request(raw), None),
        ("guards: validate_conversation", lambda: validate_conversation(payload), None),
        ("guards: detect_tool_loops", lambda: detect_tool_loops(request), None),
        ("guards: detect_tool_loops, 300 tool rounds", lambda: detect_tool_loops(long_session), None),
        ("guards: detect_tool_loops, 100-round loop", lambda: detect_tool_loops(looping_session), None),
    ]
    for name, function, target in rows:
        median, p90 = measure(function, args.runs)
        verdict = (
            ""
            if target is None
            else ("  [target ≤ {:.0f} ms: {}]".format(target, "met" if median <= target else "MISSED"))
        )
        print(f"{name:45s} median {median:6.3f} ms   p90 {p90:6.3f} ms{verdict}")


if __name__ == "__main__":
    main()
