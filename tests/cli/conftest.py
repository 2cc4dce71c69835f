"""Fixtures of the command-line tests."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from q2api.settings import READ_VARIABLES
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread


@pytest.fixture
def token_service_thread() -> Iterator[SimulationThread]:
    """The thread `token_service` runs on (to change it on its own loop: `thread.run(sim.add_host(…))`)."""
    with SimulatedUpstream.run_in_thread() as thread:
        thread.sim.oidc_client = None
        yield thread


@pytest.fixture
def token_service(token_service_thread: SimulationThread) -> SimulatedUpstream:
    """The simulated token services `accounts add` verifies with; they accept any token and client."""
    return token_service_thread.sim


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token_service: SimulatedUpstream) -> Path:
    """An isolated store for in-process `main([...])` calls: no inherited setting, no `.env`, no terminal,
    and the token services and Amazon Q on loopback."""
    for variable in READ_VARIABLES:  # the settings, deprecated ones and the commands' inputs
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # a `.env` is read from the working directory; there is none here
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    data = tmp_path / "store"
    monkeypatch.setenv("Q2API_DATA_DIR", str(data))
    monkeypatch.setenv("AMAZONQ_OIDC_ENDPOINT", token_service.oidc_url)
    monkeypatch.setenv("AMAZONQ_KIRO_REFRESH_ENDPOINT", token_service.kiro_refresh_url)
    # Amazon Q itself too: an IdC login's profile is looked up there, an API key is checked there.
    monkeypatch.setenv("AMAZONQ_ENDPOINT", token_service.url)
    return data
