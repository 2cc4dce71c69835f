"""Fuzz run: many hostile bodies against the real gateway's doors — never a 5xx, always the door's envelope, no traceback.

    .venv/bin/python bench/fuzz_gateway.py [--examples 20000] [--seed N]

The CI test (tests/server/test_fuzz_gateway.py) posts a thousand bodies; this
posts as many as asked, from the same strategies (tests/support/fuzz_bodies.py),
to a gateway on the simulated upstream, and prints the statuses it saw. On the
first bad answer hypothesis shrinks the body to a small reproducer and the run
fails with it (exit status 1).
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2
from hypothesis import HealthCheck, given, seed, settings
from loguru import logger

from q2api.settings import load_settings
from q2api.testing.gateway_server import GatewayThread
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.fuzz_chat_bodies import door_cases, door_problem

CLIENT_KEY = "fuzz-client-key"


def fuzz_against(
    base_url: str, examples: int, seed_value: int | None
) -> tuple[collections.Counter[tuple[str, int]], str | None]:
    """Post `examples` hostile bodies; the statuses seen, and the failure (None if every answer was right)."""
    bad_log_lines: list[str] = []

    def watch(message: object) -> None:
        record = message.record  # type: ignore[attr-defined]
        if record["level"].no >= 40 or record["exception"] is not None:
            bad_log_lines.append(str(message))

    logger.remove()
    # At DEBUG, so the conversion summary and the redacted dumps are built for every body too.
    logger.add(watch, level="DEBUG", diagnose=False)
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # the simulator's own noise when a reply is cut
    statuses: collections.Counter[tuple[str, int]] = collections.Counter()
    headers = {"x-api-key": CLIENT_KEY, "content-type": "application/json"}
    with httpx2.Client(base_url=base_url, headers=headers, timeout=60) as http:

        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(case=door_cases)
        def fuzz(case: tuple[str, bytes]) -> None:
            endpoint, body = case
            bad_log_lines.clear()
            response = http.post(endpoint, content=body)
            statuses[(endpoint, response.status_code)] += 1
            problem = door_problem(endpoint, response.status_code, response.content)
            assert problem is None, problem
            assert not bad_log_lines, "".join(bad_log_lines)

        if seed_value is not None:
            fuzz = seed(seed_value)(fuzz)
        try:
            fuzz()
        except AssertionError as failure:
            return statuses, str(failure)
    return statuses, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    args = parser.parse_args()

    with SimulatedUpstream.run_in_thread() as upstream, tempfile.TemporaryDirectory() as data_dir:
        env = {
            **upstream.env("idc"),
            "Q2API_DATA_DIR": data_dir,
            "Q2API_API_KEYS": CLIENT_KEY,
            "Q2API_STREAM_HOLD_SECONDS": "0",
            "DEBUG_MESSAGE_CONVERSION": "true",
        }
        with GatewayThread(load_settings(env, env_file=None)) as gateway:
            started = time.perf_counter()
            statuses, failure = fuzz_against(gateway.base_url, args.examples, args.seed)
            elapsed = time.perf_counter() - started

    total = sum(statuses.values())
    print(f"{total} bodies in {elapsed:.1f} s ({total / elapsed:.0f}/s); statuses:")
    for (endpoint, status), count in sorted(statuses.items()):
        print(f"  {endpoint:28} {status}  {count}")
    if failure is not None:
        print(f"FAILED (shrunk reproducer above): {failure}")
        return 1
    print("result: ok — no 5xx, every error in the envelope, no ERROR or traceback logged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
