"""`GET /metrics` of a running gateway: what it counts, as Prometheus parses it.

The gateway runs in this process, whose metrics live as long as the process:
every test compares a scrape before with a scrape after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx2
import pytest

from q2api.server import doors, metrics
from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, ask, find_secrets, open_gateway, user
from tests.support.metrics_scrape import Scrape

SERVED_MODEL = "claude-sonnet-5.5"  # the Amazon Q id MODEL is served with
MESSAGES = "/v1/messages"


async def scrape(gw: Gateway) -> Scrape:
    # No client key: /metrics is open, like /healthz.
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=10) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")  # the Prometheus text format
    return Scrape(response.text)


def requests(scrape: Scrape, route: str, model: str, status: str) -> float:
    return scrape.value("q2api_requests_total", route=route, model=model, status=status)


async def test_metrics_count_the_requests_just_made_through_the_sdk(gw: Gateway):
    before = await scrape(gw)
    assert await ask(gw.client, "one")
    assert await ask(gw.client, "two", stream=True)
    after = await scrape(gw)

    assert requests(after, MESSAGES, SERVED_MODEL, "200") - requests(before, MESSAGES, SERVED_MODEL, "200") == 2
    for histogram, labels in (
        ("q2api_time_to_first_token_seconds_count", {"model": SERVED_MODEL}),
        ("q2api_request_duration_seconds_count", {"route": MESSAGES}),
    ):
        assert after.value(histogram, **labels) - before.value(histogram, **labels) == 2
    attempts = "q2api_upstream_attempts_total"
    assert after.value(attempts, outcome="ok") - before.value(attempts, outcome="ok") == 2
    assert after.value("q2api_upstream_retries_total") == before.value("q2api_upstream_retries_total")
    # The environment account starts with a refresh token only: the start-up catalogue read
    # refreshed it, once, and the requests reuse that token.
    refreshes = "q2api_token_refreshes_total"
    assert after.value(refreshes, outcome="success") - before.value(refreshes, outcome="success") == 0
    assert gw.sim.refresh_calls == 1
    assert after.value("q2api_active_streams") == 0
    assert after.value("q2api_account_ready", account_id="env", account="environment") == 1
    assert after.value("q2api_account_health", account_id="env", account="environment", health="ready") == 1
    # The scrape before this one is counted too, under its own route.
    assert requests(after, "/metrics", "-", "200") - requests(before, "/metrics", "-", "200") == 1


async def test_refused_and_unknown_requests_are_counted_with_bounded_labels(gw: Gateway):
    before = await scrape(gw)
    async with gw.http() as http:
        assert (await http.post(MESSAGES, json={"model": MODEL, "messages": [user("hi")]})).status_code == 400
        assert (await http.get("/v1/models")).status_code == 200
        assert (await http.get("/wp-admin/setup.php")).status_code == 404
        assert (await http.get("/.env")).status_code == 404
    after = await scrape(gw)

    assert requests(after, MESSAGES, "-", "400") - requests(before, MESSAGES, "-", "400") == 1
    assert requests(after, "/v1/models", "-", "200") - requests(before, "/v1/models", "-", "200") == 1
    assert requests(after, "other", "-", "404") - requests(before, "other", "-", "404") == 2
    routes = {series["route"] for series in after.series("q2api_requests_total")}
    assert routes <= doors.ROUTE_LABELS.labels | {metrics.OTHER_ROUTE}


async def test_a_retried_upstream_failure_counts_two_attempts_and_one_retry(gw: Gateway):
    gw.sim.enqueue(scripts.server_error(500), scripts.text_reply("after a retry"))
    before = await scrape(gw)
    assert await ask(gw.client) == "after a retry"
    after = await scrape(gw)

    attempts = "q2api_upstream_attempts_total"
    assert after.value(attempts, outcome="server_error") - before.value(attempts, outcome="server_error") == 1
    assert after.value(attempts, outcome="ok") - before.value(attempts, outcome="ok") == 1
    assert after.value("q2api_upstream_retries_total") - before.value("q2api_upstream_retries_total") == 1


async def test_a_rejected_refresh_is_counted_and_the_account_is_shown_not_ready(gw: Gateway):
    gw.sim.refresh_failure = "invalid_grant"
    gw.sim.enqueue(scripts.bearer_invalid())  # the token taken at start-up is refused: a refresh is needed
    before = await scrape(gw)
    with pytest.raises(anthropic.AuthenticationError):
        await ask(gw.client)
    after = await scrape(gw)

    refreshes = "q2api_token_refreshes_total"
    assert after.value(refreshes, outcome="rejected") - before.value(refreshes, outcome="rejected") == 1
    assert requests(after, MESSAGES, SERVED_MODEL, "401") - requests(before, MESSAGES, SERVED_MODEL, "401") == 1
    assert after.value("q2api_account_ready", account_id="env", account="environment") == 0
    assert after.value("q2api_account_health", account_id="env", account="environment", health="needs_login") == 1
    assert not find_secrets(after.text)


async def test_active_streams_counts_a_stream_while_it_runs(tmp_path):
    async with open_gateway(tmp_path, Q2API_STREAM_HOLD_SECONDS="0") as gw:
        gw.sim.enqueue(scripts.stalled_reply(30, text_before="Working", text_after=" done"))
        async with gw.http() as http:
            body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [user("take your time")]}
            during = None
            async with http.stream("POST", MESSAGES, json=body) as response:
                async for chunk in response.aiter_bytes():
                    if b"Working" in chunk:
                        during = await scrape(gw)
                        break
            assert during is not None and during.value("q2api_active_streams") == 1
            # The client left mid-stream: the stream ends, and so does its count.
            assert await gw.sim.wait_until(lambda: gw.sim.active_streams == 0, timeout=5)
        assert (await scrape(gw)).value("q2api_active_streams") == 0


def test_credits_set_by_the_usage_code_are_exposed_per_account():
    metrics.record_account_credits("acct1", "work", used=120.5, limit=500)
    # The Amazon Q side reports them through its observer hook (it cannot import this room).
    metrics.UPSTREAM_OBSERVER.account_credits("acct2", "home", 3, 50)
    exposed = Scrape(metrics.render().decode())
    assert exposed.value("q2api_account_credits_used", account_id="acct1", account="work") == 120.5
    assert exposed.value("q2api_account_credits_limit", account_id="acct1", account="work") == 500
    assert exposed.value("q2api_account_credits_used", account_id="acct2", account="home") == 3
    assert exposed.value("q2api_account_credits_limit", account_id="acct2", account="home") == 50


_WORKER = """
import sys, time
from q2api.server import metrics
metrics.observe_request(route="/v1/messages", model="claude-sonnet-5.5", status=200, seconds=0.2)
metrics.stream_started()
print("ready", flush=True)
if sys.argv[1] == "stay":
    time.sleep(60)
"""


def test_the_multiprocess_exposition_sums_workers_and_forgets_a_dead_workers_streams(tmp_path, monkeypatch):
    """Two worker processes write to one directory; one dies with a stream still counted."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    dead = subprocess.run([sys.executable, "-c", _WORKER, "die"], env=env, capture_output=True, text=True, timeout=60)
    assert dead.stdout.strip() == "ready", dead.stderr
    alive = subprocess.Popen([sys.executable, "-c", _WORKER, "stay"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert alive.stdout is not None and alive.stdout.readline().strip() == "ready"
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
        exposed = Scrape(metrics.render().decode())
    finally:
        alive.kill()
        alive.wait(timeout=10)

    # Counts of the dead worker stay (they happened); its stream no longer does.
    assert exposed.value("q2api_requests_total", route=MESSAGES, model="claude-sonnet-5.5", status="200") == 2
    assert exposed.value("q2api_request_duration_seconds_count", route=MESSAGES) == 2
    assert exposed.value("q2api_active_streams") == 1
    assert not list(directory.glob(f"gauge_livesum_{dead_pid(directory, alive.pid)}.db"))


def dead_pid(directory: Path, alive_pid: int) -> str:
    """The pid of the worker that died, from the counter files both wrote."""
    pids = {path.stem.rsplit("_", 1)[1] for path in directory.glob("counter_*.db")}
    (pid,) = pids - {str(alive_pid)}
    return pid


async def test_the_responses_routes_are_counted_under_their_templates(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("stored"))
    before = await scrape(gw)
    async with gw.http() as http:
        created = (await http.post("/v1/responses", json={"model": MODEL, "input": "hi"})).json()
        assert (await http.get(f"/v1/responses/{created['id']}")).status_code == 200
        assert (await http.get(f"/v1/responses/{created['id']}/input_items")).status_code == 200
        assert (await http.get("/v1/responses/resp_unknown")).status_code == 404
    after = await scrape(gw)

    def added(route: str, status: str, model: str = "-") -> float:
        return requests(after, route, model, status) - requests(before, route, model, status)

    assert added("/v1/responses", "200", "claude-sonnet-5.5") == 1
    assert added("/v1/responses/{id}", "200") == 1 and added("/v1/responses/{id}", "404") == 1
    assert added("/v1/responses/{id}/input_items", "200") == 1
    routes = {series["route"] for series in after.series("q2api_requests_total")}
    assert routes <= doors.ROUTE_LABELS.labels | {metrics.OTHER_ROUTE}


async def test_metrics_count_the_event_loop_tasks_of_the_worker_that_answers(gw: Gateway):
    # A leak of tasks (a watchdog never cancelled, a settle never awaited) shows as this figure rising.
    idle = (await scrape(gw)).value("q2api_event_loop_tasks")
    assert idle >= 1  # the request that reads it is a task itself
    for _ in range(5):
        assert await ask(gw.client, "one more", stream=True)
    assert (await scrape(gw)).value("q2api_event_loop_tasks") <= idle + 2
