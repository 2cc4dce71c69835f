"""A gateway with one of its kept optimisations turned off, to measure what that optimisation buys.

    .venv/bin/python bench/bench_gateway.py --only ttft,cpu \
        --gateway-command ".venv/bin/python bench/without.py checkpoints"

`bench_gateway.py --gateway-command` runs this in place of `python -m q2api` (one worker: the
patches live in this process, and `--workers 2` would start fresh ones without them). Each name
puts back the plain version the optimisation replaced, as BENCHMARKS.md's table of optimisations
describes it; the gateway's behaviour is the same, only its cost changes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def no_checkpoints() -> None:
    """Every request converted from scratch, its history included."""
    from q2api.conversion.checkpoints import CheckpointStore

    CheckpointStore.find = lambda self, conversation_id, messages: None  # type: ignore[method-assign]


def no_json_levels() -> None:
    """The null scan and the depth check take their plain walks (no gc.get_referents)."""
    from q2api.anthropic import json_levels as levels
    from q2api.conversion import null_scan

    def plain(values: list[object]) -> object:
        raise levels.NotPlainJSON
        yield  # a generator, like the real one

    levels.json_levels = plain  # type: ignore[assignment]
    null_scan.json_levels = plain  # type: ignore[assignment]


def no_checked_run() -> None:
    """Conversions still resume from checkpoints, but the order guard reads every history entry."""
    from q2api.conversion import pipeline

    validate = pipeline.validate_conversation
    pipeline.validate_conversation = lambda payload, checked=None: validate(payload)  # type: ignore[assignment]


def no_allocator() -> None:
    """malloc's defaults: large blocks mapped afresh and unmapped when freed, nothing given back when idle."""
    from q2api.server.allocator import GlibcAllocator

    GlibcAllocator.load = classmethod(lambda cls: None)  # type: ignore[method-assign,assignment]


def no_single_off_loop_thread() -> None:
    """Large bodies prepared on a pool of threads (asyncio's default size), as before issue 33."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from q2api.server.lifecycle import off_loop

    off_loop._WORKER = ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4))


def no_off_loop() -> None:
    """Every body prepared on the event loop, however large."""
    from q2api.server.lifecycle import relay

    relay.OFF_LOOP_BODY_BYTES = 1 << 62


class _TimerPerWait:
    """WaitDeadline's interface, with a loop timer armed before every wait and cancelled after it
    (what `asyncio.timeout()` does, without its context-manager frames)."""

    __slots__ = ("_fired", "_handle", "_task")

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._fired = False

    def begin(self, deadline: float) -> None:
        self._task = asyncio.current_task()
        self._fired = False
        self._handle = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    def end(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def expired(self) -> bool:
        fired, self._fired = self._fired, False
        if fired:
            assert self._task is not None
            self._task.uncancel()
        return fired

    def close(self) -> None:
        self.end()

    def _on_timer(self) -> None:
        self._handle = None
        self._fired = True
        assert self._task is not None
        self._task.cancel()


def no_wait_deadline() -> None:
    """A loop timer per timed wait (two per relayed chunk: the ping wait and the upstream silence)."""
    from q2api.amazonq import upstream_stream
    from q2api.translation import pump

    pump.WaitDeadline = _TimerPerWait  # type: ignore[assignment,misc]
    upstream_stream.WaitDeadline = _TimerPerWait  # type: ignore[assignment,misc]


def nothing() -> None:
    """The gateway as it is, started the same way (the baseline of a comparison)."""


VARIANTS: dict[str, Callable[[], None]] = {
    "nothing": nothing,
    "checkpoints": no_checkpoints,
    "json-levels": no_json_levels,
    "checked-run": no_checked_run,
    "off-loop": no_off_loop,
    "allocator": no_allocator,
    "single-off-loop-thread": no_single_off_loop_thread,
    "wait-deadline": no_wait_deadline,
}


def main() -> int:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else []
    unknown = [name for name in names if name not in VARIANTS]
    if not names or unknown:
        print(f"usage: without.py NAME[,NAME…] serve …  (names: {', '.join(VARIANTS)})", file=sys.stderr)
        return 2
    for name in names:
        VARIANTS[name]()
    from q2api.cli.main import main as q2api_main

    return q2api_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
