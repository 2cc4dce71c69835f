"""Benchmark: the work a ~200 KB Claude Code request costs before the upstream call.

    .venv/bin/python bench/bench_conversion.py [--size-kb 200] [--runs 1000]

Prints median and p90 (milliseconds) of each step `MessagesRelay.prepare` takes, in its order,
then the whole of it:
  parse + validate       the front door's read: msgspec decode + the depth check of tool documents
  loop guard             detect_tool_loops (also on a 300-round session and one ending in a loop)
  convert                convert_claude_request() on an already-parsed request: from scratch (the first
                         request of a session), and the session's next turn (the same history and
                         one more tool round), resumed where the turn before stopped
  output validation      validate_conversation() on the converted body: from scratch, and for the
                         next turn, given where the previous turn's entries were found valid
  token estimate         estimate_request_tokens()
  orjson.dumps           the upstream body (the upstream client adds profileArn and encodes it)
  whole prepare()        door.read + MessagesRelay.prepare + orjson.dumps of the payload, for the
                         first request of a session and for its next turn

Every run of a "next turn" row starts from the previous turn's checkpoint alone (set up outside
the timed part): no run profits from an earlier run of the very same request.

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

from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.conversion.checkpoints import CheckpointStore
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request, session_conversation_id
from q2api.conversion.loop_guard import detect_tool_loops
from q2api.conversion.order_guard import validate_conversation
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.models.routing import ModelRouter
from q2api.models.table import builtin_catalogue, resolve_model
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.lifecycle.relay import MessagesRelay
from q2api.settings import Settings
from tests.support.claude_code_request import claude_code_request

PREPARE_BUDGET_MS = 0.75


def measure(
    function: Callable[[], object], runs: int, setup: Callable[[], object] = lambda: None
) -> tuple[float, float]:
    for _ in range(min(50, runs)):  # warm-up
        setup()
        function()
    samples = []
    gc.collect()
    for _ in range(runs):
        setup()
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


def next_turn(body: dict[str, Any]) -> dict[str, Any]:
    """The session's next request: the same conversation and one more tool round."""
    tool_use = {"type": "tool_use", "id": "toolu_next", "name": "Bash", "input": {"command": "pytest -q"}}
    tool_result = {"type": "tool_result", "tool_use_id": "toolu_next", "content": "412 passed in 9.81s"}
    return {
        **body,
        "messages": [
            *body["messages"],
            {"role": "assistant", "content": [{"type": "text", "text": "Running the tests."}, tool_use]},
            {"role": "user", "content": [tool_result]},
        ],
    }


def relay() -> MessagesRelay:
    """The relay as the app builds it, on the built-in model catalogue; prepare() never reaches the upstream."""
    catalogue = builtin_catalogue()
    return MessagesRelay(
        upstream=None,  # type: ignore[arg-type]
        settings=Settings(),
        models=ModelRouter(lambda: catalogue),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-kb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    logger.remove()  # prepare() logs what the conversion changed, at INFO, on every request

    gateway = relay()

    def whole_prepare(body: bytes) -> bytes:
        exchange = Exchange(request_id="bench", request_bytes=len(body))
        prepared = gateway.prepare(CLAUDE_DOOR.read(body), exchange)
        return orjson.dumps(prepared.conversion.payload)

    body = claude_code_request(size_kb=args.size_kb)
    raw, next_raw = orjson.dumps(body), orjson.dumps(next_turn(body))
    options = ConversionOptions(
        conversation_id="5f1c6c1e-0000-4000-8000-000000000000", model=resolve_model(body["model"])
    )
    request, next_request = parse_messages_request(raw), parse_messages_request(next_raw)
    payload = convert_claude_request(request, options).payload
    session = session_conversation_id(request)
    assert session is not None

    def no_checkpoints() -> None:
        gateway.checkpoints = CheckpointStore(max_bytes=1 << 30)

    # The previous turn's checkpoint, as prepare() keeps it (its history entries checked by the guard).
    no_checkpoints()
    whole_prepare(raw)
    checkpoint = gateway.checkpoints.find(session, request.messages)
    assert checkpoint is not None and checkpoint.checked is not None
    next_payload = convert_claude_request(next_request, options, checkpoint).payload

    def previous_turn_only() -> None:
        no_checkpoints()
        gateway.checkpoints.keep(session, checkpoint, len(raw), replacing=None)

    long_session = tool_session([("Read", {"file_path": f"/src/{n}.py"}, f"# {n}\n" + "x" * 4000) for n in range(300)])
    looping_session = tool_session(
        [("Read", {"file_path": f"/src/{n}.py"}, f"# {n}") for n in range(200)]
        + [("Bash", {"command": "git status"}, "nothing to commit")] * 100
    )

    print(
        f"request: {len(raw) / 1024:.0f} KB, {len(request.messages)} messages, {len(request.tools or [])} tools; "
        f"Amazon Q body: {len(orjson.dumps(payload)) / 1024:.0f} KB; {args.runs} runs"
    )
    rows: list[tuple[str, Callable[[], object], Callable[[], object], float | None]] = [
        ("parse + validate (door.read)", lambda: CLAUDE_DOOR.read(raw), no_checkpoints, None),
        ("loop guard", lambda: detect_tool_loops(request), no_checkpoints, None),
        ("loop guard, 300 tool rounds", lambda: detect_tool_loops(long_session), no_checkpoints, None),
        ("loop guard, 100-round loop", lambda: detect_tool_loops(looping_session), no_checkpoints, None),
        ("convert, from scratch", lambda: convert_claude_request(request, options), no_checkpoints, None),
        (
            "convert, next turn resumed",
            lambda: convert_claude_request(next_request, options, checkpoint),
            no_checkpoints,
            None,
        ),
        ("output validation, from scratch", lambda: validate_conversation(payload), no_checkpoints, None),
        (
            "output validation, next turn (checked run)",
            lambda: validate_conversation(next_payload, checkpoint.checked),
            no_checkpoints,
            None,
        ),
        ("token estimate (estimate_request_tokens)", lambda: estimate_request_tokens(request), no_checkpoints, None),
        ("orjson.dumps of the Amazon Q body", lambda: orjson.dumps(payload), no_checkpoints, None),
        ("whole prepare(), first request of a session", lambda: whole_prepare(raw), no_checkpoints, None),
        (
            "whole prepare(), the session's next turn",
            lambda: whole_prepare(next_raw),
            previous_turn_only,
            PREPARE_BUDGET_MS,
        ),
    ]
    for name, function, setup, budget in rows:
        median, p90 = measure(function, args.runs, setup)
        verdict = "" if budget is None else f"  [budget ≤ {budget} ms: {'met' if median <= budget else 'MISSED'}]"
        print(f"{name:47s} median {median:6.3f} ms   p90 {p90:6.3f} ms{verdict}")


if __name__ == "__main__":
    main()
