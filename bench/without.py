"""A gateway with one of its kept optimisations turned off, to measure what that optimisation buys.

    .venv/bin/python bench/bench_gateway.py --only ttft,cpu \
        --gateway-command ".venv/bin/python bench/without.py checkpoints"

`bench_gateway.py --gateway-command` runs this in place of `python -m q2api` (one worker: the
patches live in this process, and `--workers 2` would start fresh ones without them). Each name
puts back the plain version the optimisation replaced, as BENCHMARKS.md's table of optimisations
describes it; the gateway's behaviour is the same, only its cost changes.
"""

from __future__ import annotations

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


def no_off_loop() -> None:
    """Every body prepared on the event loop, however large."""
    from q2api.server import relay

    relay.OFF_LOOP_BODY_BYTES = 1 << 62


def nothing() -> None:
    """The gateway as it is, started the same way (the baseline of a comparison)."""


VARIANTS: dict[str, Callable[[], None]] = {
    "nothing": nothing,
    "checkpoints": no_checkpoints,
    "json-levels": no_json_levels,
    "off-loop": no_off_loop,
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
