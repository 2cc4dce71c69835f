"""Benchmark: the work a ~200 KB Claude Code request costs before the upstream call.

    .venv/bin/python bench/bench_conversion.py [--size-kb 200] [--runs 1000]

Prints median and p90 (milliseconds) of each step `MessagesRelay.prepare` takes, in its order,
then the whole of it:
  parse + validate       the front door's read: msgspec decode + the depth check of tool documents
  loop guard             detect_tool_loops (also on a 300-round session and one ending in a loop)
  convert                convert_request() on an already-parsed request
  output validation      validate_conversation() on the converted body
  token estimate         estimate_request_tokens()
  orjson.dumps           the upstream body (the upstream client adds profileArn and encodes it)
  whole prepare()        door.read + MessagesRelay.prepare + orjson.dumps of the payload

Budget: the gateway may add at most 1.5 ms to the time to first token of this request
(bench/bench_gateway.py section 1); a tiny request, which costs next to nothing to prepare,
already adds ~0.75 ms of HTTP in and out. What is left for the whole prepare() is ~0.75 ms.
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
from loguru import logger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from q2api.amazonq.catalogue import builtin_catalogue
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.conversion.converter import ConversionOptions, convert_request
from q2api.conversion.loop_guard import detect_tool_loops
from q2api.conversion.order_guard import validate_conversation
from q2api.server.exchange_log import Exchange
from q2api.server.front_door import CLAUDE_DOOR
from q2api.server.model_routing import ModelRouter
from q2api.server.relay import MessagesRelay
from q2api.settings import Settings
from q2api.testing.claude_code_request import claude_code_request

PREPARE_BUDGET_MS = 0.75


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


def relay() -> MessagesRelay:
    """The relay as the app builds it, on the built-in model catalogue; prepare() never reaches the upstream."""
    catalogue = builtin_catalogue()
    return MessagesRelay(
        upstream=None,  # type: ignore[arg-type]
        settings=Settings(),
        model_aliases={},
        models=ModelRouter(lambda: catalogue),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-kb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    logger.remove()  # prepare() logs what the conversion changed, at INFO, on every request

    raw = orjson.dumps(claude_code_request(size_kb=args.size_kb))
    options = ConversionOptions(conversation_id="5f1c6c1e-0000-4000-8000-000000000000")
    request = parse_messages_request(raw)
    payload = convert_request(request, options).payload
    gateway = relay()

    long_session = tool_session([("Read", {"file_path": f"/src/{n}.py"}, f"# {n}\n" + "x" * 4000) for n in range(300)])
    looping_session = tool_session(
        [("Read", {"file_path": f"/src/{n}.py"}, f"# {n}") for n in range(200)]
        + [("Bash", {"command": "git status"}, "nothing to commit")] * 100
    )

    def whole_prepare() -> bytes:
        prepared = gateway.prepare(CLAUDE_DOOR.read(raw), Exchange(request_id="bench"))
        return orjson.dumps(prepared.conversion.payload)

    print(
        f"request: {len(raw) / 1024:.0f} KB, {len(request.messages)} messages, {len(request.tools or [])} tools; "
        f"Amazon Q body: {len(orjson.dumps(payload)) / 1024:.0f} KB; {args.runs} runs"
    )
    rows: list[tuple[str, Callable[[], object], float | None]] = [
        ("parse + validate (door.read)", lambda: CLAUDE_DOOR.read(raw), None),
        ("loop guard", lambda: detect_tool_loops(request), None),
        ("loop guard, 300 tool rounds", lambda: detect_tool_loops(long_session), None),
        ("loop guard, 100-round loop", lambda: detect_tool_loops(looping_session), None),
        ("convert", lambda: convert_request(request, options), None),
        ("output validation (validate_conversation)", lambda: validate_conversation(payload), None),
        ("token estimate (estimate_request_tokens)", lambda: estimate_request_tokens(request), None),
        ("orjson.dumps of the Amazon Q body", lambda: orjson.dumps(payload), None),
        ("whole prepare() + orjson.dumps", whole_prepare, PREPARE_BUDGET_MS),
    ]
    for name, function, budget in rows:
        median, p90 = measure(function, args.runs)
        verdict = "" if budget is None else f"  [budget ≤ {budget} ms: {'met' if median <= budget else 'MISSED'}]"
        print(f"{name:45s} median {median:6.3f} ms   p90 {p90:6.3f} ms{verdict}")


if __name__ == "__main__":
    main()
