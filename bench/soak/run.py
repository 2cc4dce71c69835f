"""One deployment soaked: start it, warm it up, run everything at once, drain, look, stop, judge.

The order matters for what the checks can see: the warm-up ends drained so that the processes'
holdings afterwards are compared idle with idle; stored responses are read back while the fleet
still runs (from a process other than the one that stored them); the ledger is read once every
process has stopped, because a gateway writes its last ledger rows as it shuts down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import sqlalchemy as sa

from bench.soak import invariants
from bench.soak.clients import CLIENTS, MODEL, TIMEOUT, Traffic
from bench.soak.deployments import Deployment, Fleet, running
from bench.soak.invariants import Verdict
from bench.soak.journal import Journal
from bench.soak.operators import admin_polls, command_line, create_keys, imported_access_token
from bench.soak.resources import DATABASE_PORTS, Holdings, RssSamples, holdings
from bench.soak.upstream import marker
from bench.soak.workers import KeptConnection, connections_to_every_worker
from q2api.testing.simulation_thread import SimulationThread
from tests.support.databases import run_sql

RELOAD_INTERVAL = 2.0  # q2api.accounts.reload.DEFAULT_RELOAD_INTERVAL
IMPORT_SLACK = 1.0  # seconds past the reload interval for a busy worker to read the store, and for us to see it
WARM_UP_SECONDS = 3.0
DRAIN_SECONDS = 20.0
TASKS_METRIC = "q2api_event_loop_tasks"


@dataclasses.dataclass
class Result:
    deployment: Deployment
    verdicts: list[Verdict]
    requests: int
    seconds: float

    @property
    def held(self) -> bool:
        return all(verdict.held for verdict in self.verdicts)


async def _traffic(traffic: Traffic, seconds: float, *, operators: bool) -> None:
    actors = [client(traffic) for client in CLIENTS]
    if operators:
        actors += [command_line(traffic, seconds), admin_polls(traffic)]
    await asyncio.gather(*actors)
    await traffic.close()


async def _active_streams(fleet: Fleet, session: aiohttp.ClientSession) -> int:
    total = 0
    for target in fleet.targets:
        async with session.get(target + "/metrics") as answer:
            for line in (await answer.text()).splitlines():
                if line.startswith("q2api_active_streams "):
                    total += round(float(line.split()[1]))
    return total


async def _drained(fleet: Fleet, sim: SimulationThread) -> tuple[int, int]:
    """Wait until no stream is open in the gateway nor at the simulator; what was still open at the end."""
    deadline = time.monotonic() + DRAIN_SECONDS
    async with aiohttp.ClientSession() as session:
        while True:
            gateway_streams = await _active_streams(fleet, session)
            upstream_streams = sim.sim.active_streams
            if (gateway_streams == 0 and upstream_streams == 0) or time.monotonic() > deadline:
                await asyncio.sleep(1.0)  # closed client connections reach the gateway's side
                return gateway_streams, upstream_streams
            await asyncio.sleep(0.1)


async def _event_loop_tasks(fleet: Fleet) -> int:
    """Tasks on every worker's event loop: each worker counts its own as it answers /metrics, so each is asked."""

    async def scrape(connection: KeptConnection) -> bytes:
        status, body = await connection.request("GET", "/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        return body

    pins = await connections_to_every_worker(fleet, scrape)
    try:
        total = 0
        for target in fleet.targets:
            last = b""
            for pin in (pin for pin in pins if pin.target == target):
                last = await scrape(pin)  # the target's sum, once every worker of it has refreshed its figure
            total += round(
                float(
                    next(line.split()[1] for line in last.decode().splitlines() if line.startswith(TASKS_METRIC + " "))
                )
            )
        return total
    finally:
        for pin in pins:
            pin.close()


def _holdings(fleet: Fleet, sim_port: int) -> dict[int, Holdings]:
    database_file = "q2api.sqlite3" if fleet.deployment.engine == "sqlite" else None
    database_port = DATABASE_PORTS.get(fleet.deployment.engine)
    return {
        pid: holdings(pid, database_port=database_port, upstream_port=sim_port, database_file=database_file)
        for pids in fleet.worker_pids().values()
        for pid in pids
    }


async def _read_back(traffic: Traffic) -> tuple[dict[str, int], dict[str, int]]:
    """Every stored response read from another process; a sample of them continued (the answers journaled)."""
    fleet, journal = traffic.fleet, traffic.journal
    key = traffic.keys["soak-responses"]
    retrieved: dict[str, int] = {}
    continued: dict[str, int] = {}
    limit = asyncio.Semaphore(8)
    headers = {"authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session:

        async def retrieve(stored: Any) -> None:
            others = [target for target in fleet.targets if target != stored.target] or fleet.targets
            async with limit, session.get(f"{traffic.rng.choice(others)}/v1/responses/{stored.response_id}") as answer:
                retrieved[stored.response_id] = answer.status

        async def continue_(stored: Any) -> None:
            target = traffic.rng.choice(fleet.targets)
            body = {"model": MODEL, "input": "soak:plain one more", "previous_response_id": stored.response_id}
            started = time.time()
            async with limit, session.post(f"{target}/v1/responses", json=body) as answer:
                await answer.read()
                continued[stored.response_id] = answer.status
            journal.answer(
                actor="responses-continued",
                key="soak-responses",
                door="responses",
                target=target,
                status=answer.status,
                started=started,
                request_id=answer.headers.get("request-id"),
            )

        await asyncio.gather(*(retrieve(stored) for stored in journal.stored))
        sample = traffic.rng.sample(journal.stored, min(10, len(journal.stored)))
        await asyncio.gather(*(continue_(stored) for stored in sample))
    return retrieved, continued


def _slow_arrivals(sim: SimulationThread, since: float) -> list[float]:
    """When the concurrency key's slow requests reached the simulator since `since` (wall-clock seconds)."""
    offset = time.time() - time.monotonic()
    wanted = marker("slow").encode()
    return [
        record.received_at + offset
        for record in list(sim.sim.requests)
        if record.received_at + offset >= since and wanted in record.raw
    ]


def _first_use(sim: SimulationThread, token: str) -> float | None:
    """When the simulator first saw `token` (wall-clock seconds)."""
    offset = time.time() - time.monotonic()
    seen = [record.received_at for record in list(sim.sim.requests) if record.access_token == token]
    return min(seen) + offset if seen else None


def _ledger_rows(fleet: Fleet) -> list[dict[str, Any]]:
    columns = "request_id, key_label, status, at, duration_ms, credits, door"
    url = fleet.store_env.get("Q2API_DATABASE_URL")
    if url is None:
        path = Path(fleet.store_env["Q2API_DATA_DIR"]) / "q2api.sqlite3"
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(f"SELECT {columns} FROM q2api_usage")]

    async def select(connection: Any) -> list[dict[str, Any]]:
        return [dict(row._mapping) for row in await connection.execute(sa.text(f"SELECT {columns} FROM q2api_usage"))]

    return run_sql(url, select)


def _keep(keep: Path, fleet: Fleet, journal: Journal, rows: list[dict[str, Any]]) -> None:
    """What a failed invariant is investigated from: the logs, the journal and the ledger, as files."""
    keep.mkdir(parents=True, exist_ok=True)
    for index, gateway in enumerate(fleet.gateways):
        shutil.copy(gateway.log_path, keep / f"gateway-{index}.log")
    (keep / "answers.json").write_bytes(orjson.dumps(journal.answers, option=orjson.OPT_INDENT_2))
    (keep / "commands.json").write_bytes(orjson.dumps(journal.commands, option=orjson.OPT_INDENT_2))
    (keep / "ledger.json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2, default=str))


async def soak(
    deployment: Deployment, sim: SimulationThread, scratch: Path, seconds: float, seed: int, keep: Path | None = None
) -> Result:
    rng = random.Random(seed)
    began = time.monotonic()
    began_at = time.time()
    with running(deployment, sim.env(), scratch) as fleet:
        await fleet.ready()
        keys = await create_keys(fleet)
        pids = [pid for worker_pids in fleet.worker_pids().values() for pid in worker_pids]
        with RssSamples(pids) as rss:
            journal = Journal()  # the warm-up's requests are in the ledger too
            warm_up = Traffic(fleet, journal, keys, time.monotonic() + WARM_UP_SECONDS, rng)
            await _traffic(warm_up, WARM_UP_SECONDS, operators=False)
            await _drained(fleet, sim)
            warm = _holdings(fleet, sim.sim.port)
            warm_tasks = await _event_loop_tasks(fleet)
            # RSS is judged from a third into the run: caches fill while traffic is new, a leak grows throughout.
            warm_until = rss.elapsed() + seconds / 3
            traffic = Traffic(fleet, journal, keys, time.monotonic() + seconds, rng, revoking=True)
            await _traffic(traffic, seconds, operators=True)
            streams_open, upstream_open = await _drained(fleet, sim)
            drained = _holdings(fleet, sim.sim.port)
            drained_tasks = await _event_loop_tasks(fleet)
        retrieved, continued = await _read_back(traffic)
        first_use = _first_use(sim, imported_access_token(fleet))
        workers = fleet.worker_pids()
        for gateway in fleet.gateways:
            gateway.stop()
        rows = await asyncio.to_thread(_ledger_rows, fleet)
        log_lines = fleet.log_lines()
        if keep is not None:
            _keep(keep / deployment.slug, fleet, journal, rows)
    verdicts = [
        invariants.answers_as_promised(journal),
        invariants.no_store_failures(journal, log_lines),
        invariants.stored_responses_kept(retrieved, continued, journal),
        invariants.ledger_exact(journal, rows),
        invariants.limits_held(rows, _slow_arrivals(sim, began_at)),
        invariants.revocation_everywhere(journal, workers),
        invariants.import_picked_up(
            journal, list(journal.joined.values()), len(pids), first_use, RELOAD_INTERVAL + IMPORT_SLACK
        ),
        invariants.memory_flat(rss.growth_after(warm_until)),
        invariants.nothing_leaked(
            warm,
            drained,
            sqlite=deployment.engine == "sqlite",
            streams_open=streams_open,
            upstream_open=upstream_open,
            tasks=(warm_tasks, drained_tasks),
        ),
    ]
    return Result(deployment, verdicts, len(journal.answers), time.monotonic() - began)
