"""The usage ledger after a mixed load: one row per request, totals that match what was sent, and
nothing lost when the gateway stops right after its last reply (the rows are written at shutdown)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
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
