"""Run the gateway of another checkout: `--gateway-command ".venv/bin/python bench/launch_checkout.py DIR"`.

    git archive 8b243a0 q2api | tar -x -C /tmp/before      # the package of an earlier commit
    .venv/bin/python bench/bench_big_turns.py --gateway-command ".venv/bin/python bench/launch_checkout.py /tmp/before"

DIR holds a `q2api` package (a checkout, or `git archive`'s extract of one); it goes first on
`sys.path`, before this repository (which the benchmarks put on PYTHONPATH), and its
`q2api.cli.main.main` gets the rest of the command line. Before and after are then measured by one
benchmark in one session, alternately, on the same installed dependencies.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    if len(sys.argv) < 2 or not (Path(sys.argv[1]) / "q2api").is_dir():
        print("usage: launch_checkout.py DIR serve …  (DIR holds a q2api package)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(sys.argv[1]).resolve()))
    # bench_big_turns.py's probe of the loop, when it asks for one (LOOP_PROBE_FILE): the benchmark's own module.
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
    from bench.support.loop_probe import install

    install()
    from q2api.cli.main import main as q2api_main

    return q2api_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
