"""The deployments a user runs, started as they are run: `q2api serve` processes on one store.

SQLite with one worker and with `--workers 2` (one data directory), and two replicas on a shared
PostgreSQL or MariaDB database; each with and without Redis holding the client keys' counters.
A shared database gets a private schema for the run (dropped at its end); Redis gets a database of
its own (`Q2API_SOAK_REDIS_URL`, default db 14), whose keys are named by key ids the run makes up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from cryptography.fernet import Fernet

from bench.support.processes import API_KEY, ROOT, GatewayProcess
from tests.support.databases import scratch_database_url

Engine = Literal["sqlite", "postgresql", "mysql"]
ADMIN_KEY = "soak-admin-key-NEVER-LOGGED"
ENV_CLIENT_KEY = API_KEY  # the Q2API_API_KEYS key every gateway process of the benchmarks accepts
REDIS_URL = os.environ.get("Q2API_SOAK_REDIS_URL", "redis://127.0.0.1:6379/14")
ACCOUNT_INFLIGHT = 64  # above the soak's concurrency: the cap is not what the soak measures


@dataclasses.dataclass(frozen=True, slots=True)
class Deployment:
    engine: Engine
    processes: int  # `--workers` on SQLite, replicas on a shared database
    redis: bool

    @property
    def name(self) -> str:
        shape = (
            f"{self.processes} worker{'s' if self.processes > 1 else ''}"
            if self.engine == "sqlite"
            else (f"{self.processes} replicas")
        )
        return f"{self.engine}, {shape}{', redis' if self.redis else ''}"

    @property
    def slug(self) -> str:
        return f"{self.engine}-{self.processes}{'-redis' if self.redis else ''}"


_SHAPES: tuple[tuple[Engine, int], ...] = (("sqlite", 1), ("sqlite", 2), ("postgresql", 2), ("mysql", 2))
ALL_DEPLOYMENTS = tuple(
    Deployment(engine, processes, redis) for engine, processes in _SHAPES for redis in (False, True)
)


class DeploymentUnavailable(Exception):
    """A database server the deployment needs does not answer (the run says so and goes on)."""


@dataclasses.dataclass
class Fleet:
    """The running processes of one deployment, and how to run the command line against their store."""

    deployment: Deployment
    gateways: list[GatewayProcess]
    store_env: dict[str, str]  # what `q2api keys|usage|accounts` need to reach the same store
    scratch: Path

    @property
    def targets(self) -> list[str]:
        return [gateway.base_url for gateway in self.gateways]

    def worker_pids(self) -> dict[str, list[int]]:
        return {gateway.base_url: gateway.worker_pids() for gateway in self.gateways}

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """`q2api ARGS…` as an operator runs it in another terminal, on the fleet's store."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("Q2API_", "AMAZONQ_"))}
        env.update(self.store_env, PYTHONPATH=str(ROOT))
        return subprocess.run(
            [sys.executable, "-m", "q2api", *args],
            env=env,
            cwd=self.scratch,  # no stray .env file
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    async def ready(self) -> None:
        await asyncio.gather(*(gateway.wait_ready(timeout=90.0) for gateway in self.gateways))

    def log_lines(self) -> list[str]:
        lines: list[str] = []
        for gateway in self.gateways:
            lines += gateway.log_path.read_text(errors="replace").splitlines()
        return lines


@contextlib.contextmanager
def _database_url(engine: Engine) -> Iterator[str | None]:
    if engine == "sqlite":
        yield None
        return
    try:
        with scratch_database_url(engine) as url:
            yield url
    except pytest.skip.Exception as exc:  # the helper skips a test when its server is absent
        raise DeploymentUnavailable(str(exc)) from None


@contextlib.contextmanager
def running(deployment: Deployment, sim_env: dict[str, str], scratch: Path, log_level: str = "INFO") -> Iterator[Fleet]:
    """The deployment's processes, serving once every worker is up; stopped (SIGTERM) at the block's end."""
    with _database_url(deployment.engine) as database_url, contextlib.ExitStack() as stack:
        # The command line reaches the SQLite store through the first process's data directory.
        store_env: dict[str, str] = {"Q2API_DATA_DIR": str(scratch / "data-0")}
        if database_url is not None:
            store_env.update(Q2API_DATABASE_URL=database_url, Q2API_SECRET_KEY=Fernet.generate_key().decode())
        if deployment.redis:
            store_env["Q2API_REDIS_URL"] = REDIS_URL
        replicas = 1 if deployment.engine == "sqlite" else deployment.processes
        gateways: list[GatewayProcess] = []
        for index in range(replicas):
            env = {
                **{name: value for name, value in store_env.items() if name != "Q2API_DATA_DIR"},
                "Q2API_ADMIN_KEY": ADMIN_KEY,
                "Q2API_ACCOUNT_MAX_INFLIGHT": str(ACCOUNT_INFLIGHT),
                "NO_PROXY": "127.0.0.1,localhost",
            }
            gateway = GatewayProcess(
                sim_env,
                scratch / f"data-{index}",
                log_level,
                cpu=None,
                workers=deployment.processes if deployment.engine == "sqlite" else 1,
                extra_env=env,
            )
            stack.callback(gateway.stop)
            gateways.append(gateway)
        fleet = Fleet(deployment, gateways, store_env, scratch)
        yield fleet
