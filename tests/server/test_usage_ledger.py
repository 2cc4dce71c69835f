"""The usage ledger after a mixed load: one row per request, totals that match what was sent, and
nothing lost when the gateway stops right after its last reply (the rows are written at shutdown)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import JSON_BODY, MODEL
from tests.support.serve_process import CLIENT_KEY, clean_environment, serve

pytestmark = pytest.mark.asyncio

OTHER_MODEL = "claude-haiku-4-5"


def q2api_usage(data_dir: Path, *args: str) -> Any:
    env = {**clean_environment(), "Q2API_DATA_DIR": str(data_dir)}
    done = subprocess.run(
        [sys.executable, "-m", "q2api", "usage", *args], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout) if "--format" in args and "json" in args else done.stdout


async def send(base_url: str, door: str, key: str, model: str = MODEL) -> int:
    if door == "claude":
        path = "/v1/messages"
        body: dict[str, Any] = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        headers = {**JSON_BODY, "x-api-key": key}
    else:
        headers = {**JSON_BODY, "authorization": f"Bearer {key}"}
        if door == "chat":
            path, body = "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        else:
            path, body = "/v1/responses", {"model": model, "input": "hi", "store": False}
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.post(base_url + path, json=body, headers=headers)).status_code


async def test_the_ledger_matches_a_mixed_load_across_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    database = await open_tenant_database(None, data_dir)
    try:
        alpha, _ = await KeyStore(database).create("alpha", KeyLimits(models=(MODEL,)))
        beta, _ = await KeyStore(database).create("beta", KeyLimits())
    finally:
        await database.close()
    sent: dict[str, list[int]] = {"alpha": [], "beta": [], "(environment key)": []}
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream.sim.responder = lambda record: scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("ok"),
            scripts.usage_event(40, 8),
            scripts.metering_event(0.05),
        )
        for run in range(2):  # the second run after a restart
            with serve(tmp_path, upstream.env(), workers=2) as server:
                jobs = []
                for n, door in enumerate(["claude", "chat", "responses"] * 3):
                    jobs.append(("alpha", send(server.base_url, door, alpha)))
                    jobs.append(("beta", send(server.base_url, door, beta)))
                    if n % 3 == 0:
                        jobs.append(("(environment key)", send(server.base_url, door, CLIENT_KEY)))
                jobs.append(("alpha", send(server.base_url, "chat", alpha, OTHER_MODEL)))  # a 403: in the ledger too
                statuses = await asyncio.gather(*(job for _label, job in jobs))
                for (label, _job), status in zip(jobs, statuses, strict=True):
                    sent[label].append(status)
            # Stopped at once after the last reply: only the shutdown's write can have kept its rows.
            by_key = {row["key"]: row for row in q2api_usage(data_dir, "--by", "key", "--format", "json")}
            for label, statuses_sent in sent.items():
                assert by_key[label]["requests"] == len(statuses_sent), (run, label, by_key)
                assert by_key[label]["errors"] == sum(status >= 400 for status in statuses_sent)
                ok = sum(status == 200 for status in statuses_sent)
                assert by_key[label]["credits"] == pytest.approx(0.05 * ok)
                # Every reply was metered; a request refused before any upstream call spent nothing, known.
                assert by_key[label]["estimated_requests"] == 0
    assert sent["alpha"].count(403) == 2 and set(sent["beta"]) == {200}
    by_day = q2api_usage(data_dir, "--by", "day", "--format", "json")
    assert sum(row["requests"] for row in by_day) == sum(len(statuses) for statuses in sent.values())
    table = q2api_usage(data_dir, "--by", "model")
    assert MODEL in table and "REQUESTS" in table
    csv_text = q2api_usage(data_dir, "--by", "key", "--format", "csv")
    assert csv_text.splitlines()[0].startswith("key,requests,errors")


def started_workers(lines: list[str]) -> list[int]:
    """The pids of the workers `q2api serve` started, oldest first (uvicorn's "Started server process [pid]")."""
    return [int(match.group(1)) for line in lines if (match := re.search(r"Started server process \[(\d+)\]", line))]


async def test_a_worker_killed_under_load_loses_no_row_of_a_request_it_answered(tmp_path: Path) -> None:
    """`kill -9` of a worker (twice) while both serve: every request answered before the kill is in the
    ledger (its row was in the journal; the worker started in its place, or the other one, writes it),
    and no row is there twice."""
    data_dir = tmp_path / "data"
    answered: list[tuple[float, str]] = []  # (when the whole reply was read, its request id)
    kills: list[float] = []
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream.sim.responder = lambda record: scripts.stream(
            scripts.conversation_event(), scripts.text_events("ok"), scripts.usage_event(5, 1), delay=0.01
        )
        with serve(tmp_path, upstream.env(), workers=2) as server:

            async def client(stop: asyncio.Event) -> None:
                async with httpx2.AsyncClient(timeout=30) as http:
                    while not stop.is_set():
                        body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
                        try:
                            response = await http.post(
                                server.base_url + "/v1/messages",
                                json=body,
                                headers={**JSON_BODY, "x-api-key": CLIENT_KEY},
                            )
                        except httpx2.HTTPError:
                            continue  # in flight on the killed worker
                        if response.status_code == 200:
                            answered.append((time.monotonic(), response.headers["request-id"]))

            stop = asyncio.Event()
            clients = [asyncio.create_task(client(stop)) for _ in range(8)]
            for _kill in range(2):
                await asyncio.sleep(1.7)  # into a second of the old ledger's one-second batches
                victim = started_workers(server.lines)[-1]
                kills.append(time.monotonic())
                os.kill(victim, signal.SIGKILL)
                server.wait_until(lambda: len(started_workers(server.lines)) == 2 + len(kills))
            await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*clients)
            # The worker in the dead one's place adopts its journal at once; the other one within seconds.
            server.wait_until(lambda: not list((data_dir / "usage-journal").glob("*.jsonl")), timeout=30)
    with sqlite3.connect(data_dir / "q2api.sqlite3") as db:
        ledger_ids = [request_id for (request_id,) in db.execute("SELECT request_id FROM q2api_usage")]
    assert len(ledger_ids) == len(set(ledger_ids))  # no row twice
    in_ledger = set(ledger_ids)
    before_a_kill = [request_id for at, request_id in answered if any(at < kill - 0.05 for kill in kills)]
    missing = [request_id for request_id in before_a_kill if request_id not in in_ledger]
    assert len(before_a_kill) > 50 and missing == [], (len(missing), len(before_a_kill))
