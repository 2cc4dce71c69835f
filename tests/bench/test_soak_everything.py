"""The soak of everything at once, bounded: each deployment, every door, the command line and the admin
API together against the simulated Amazon Q with its faults on; every invariant must hold.

`bench/soak_everything.py` runs the same for longer (its figures are in BENCHMARKS.md); this bounded
form keeps CI honest: a change that loses a stored response or a ledger row, serves a revoked key,
admits past a limit or leaks a connection fails here, in the deployment it breaks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.soak.deployments import ALL_DEPLOYMENTS, Deployment, DeploymentUnavailable
from bench.soak.invariants import table
from bench.soak.run import soak
from bench.soak.upstream import soak_simulator
from q2api.testing.simulation_thread import SimulationThread

SECONDS = 8.0  # of traffic per deployment: about 20 s each with start, warm-up, checks and stop
SEED = 30


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulationThread]:
    with soak_simulator(SEED) as sim:
        yield sim


@pytest.mark.slow
@pytest.mark.parametrize("deployment", ALL_DEPLOYMENTS, ids=lambda deployment: deployment.slug)
def test_every_invariant_holds_with_everything_at_once(
    deployment: Deployment, simulator: SimulationThread, tmp_path: Path
) -> None:
    try:
        result = asyncio.run(soak(deployment, simulator, tmp_path, SECONDS, SEED))
    except DeploymentUnavailable as exc:
        pytest.skip(f"{deployment.name}: {exc}")
    assert result.held, f"{deployment.name}, {result.requests} requests:\n{table(result.verdicts)}"
