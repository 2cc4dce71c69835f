"""Soak everything at once, in every deployment, and check what must hold: the whole system's proof.

    .venv/bin/python bench/soak_everything.py [--seconds 60] [--deployments all|sqlite-1,postgresql-2-redis,…] [--seed 1] [--keep DIR]

For each deployment (SQLite with one worker and with `--workers 2`, two replicas on PostgreSQL and on
MariaDB, each with and without Redis: bench/soak/deployments.py), `q2api serve` runs as deployed in
front of the simulated Amazon Q with its faults switched on, and for `--seconds`:

  clients     Claude streams with tool rounds, Claude JSON, chat completions (stream and not), Responses
              chains continued with previous_response_id across processes, Claude Code's web search,
              requests that ask the upstream to throttle, fail with 500, reset mid-stream, answer slowly
              or cut the stream; store keys driven over their requests a minute, requests in flight and
              credits a day; a key allowed one model asking for others on every door; a key revoked
              mid-run, probed on a connection to every worker (bench/soak/clients.py)
  operators   the command line in another process (keys create / update / list / revoke, usage, an
              account imported from a kiro-cli login) and the admin API and console polled
              (bench/soak/operators.py)

then checks the invariants (bench/soak/invariants.py) and prints them as a table per deployment.
Exits 1 when any invariant fails in any deployment; a deployment whose database server does not
answer is reported as skipped. The test suite runs a bounded form (tests/bench/test_soak_everything.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.soak.deployments import ALL_DEPLOYMENTS, Deployment, DeploymentUnavailable
from bench.soak.invariants import table
from bench.soak.run import Result, soak
from bench.soak.upstream import soak_simulator


def chosen_deployments(names: str) -> list[Deployment]:
    if names == "all":
        return list(ALL_DEPLOYMENTS)
    by_slug = {deployment.slug: deployment for deployment in ALL_DEPLOYMENTS}
    unknown = [name for name in names.split(",") if name not in by_slug]
    if unknown:
        raise SystemExit(f"unknown deployment(s) {', '.join(unknown)}; choose from {', '.join(by_slug)}")
    return [by_slug[name] for name in names.split(",")]


async def soak_all(deployments: list[Deployment], seconds: float, seed: int, keep: Path | None) -> list[Result | str]:
    """Each deployment in turn against one simulated Amazon Q; a skipped deployment is the reason why."""
    results: list[Result | str] = []
    with soak_simulator(seed) as sim:
        for index, deployment in enumerate(deployments):
            with tempfile.TemporaryDirectory(prefix=f"q2api-soak-{deployment.slug}-") as scratch:
                try:
                    results.append(await soak(deployment, sim, Path(scratch), seconds, seed + index, keep))
                except DeploymentUnavailable as exc:
                    results.append(f"{deployment.name}: skipped ({exc})")
    return results


def report(results: list[Result | str]) -> bool:
    held = True
    for result in results:
        if isinstance(result, str):
            print(result, end="\n\n")
            continue
        held &= result.held
        print(f"{result.deployment.name}: {result.requests} requests in {result.seconds:.0f} s")
        print(table(result.verdicts), end="\n\n")
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="traffic per deployment (default 60)")
    parser.add_argument("--deployments", default="all", help="all, or slugs such as sqlite-1,postgresql-2-redis")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--keep", type=Path, help="write each deployment's logs, answers and ledger rows under this folder"
    )
    args = parser.parse_args()
    results = asyncio.run(soak_all(chosen_deployments(args.deployments), args.seconds, args.seed, args.keep))
    sys.exit(0 if report(results) else 1)


if __name__ == "__main__":
    main()
