"""Operating `q2api serve` as a real process: metrics across workers, the metrics directory, start-up warnings."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
from prometheus_client.multiprocess import MultiProcessCollector

from q2api.testing.simulated_upstream import SIM_CLIENT_SECRET, SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.metrics_scrape import Scrape
from tests.support.serve_process import CLIENT_KEY, serve

BATCH = 4
SERVED = {"route": "/v1/messages", "model": "claude-sonnet-5.5", "status": "200"}


def ask_on_a_new_connection(base_url: str, *, stream: bool) -> None:
    # A new client per request: a kept-alive connection would pin every request to one worker.
    with anthropic.Anthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=0, timeout=30.0) as client:
        messages = [{"role": "user", "content": "count me"}]
        if stream:
            with client.messages.stream(model="claude-sonnet-5-5", max_tokens=32, messages=messages) as events:
                assert "count me" in events.get_final_text()
        else:
            reply = client.messages.create(model="claude-sonnet-5-5", max_tokens=32, messages=messages)
            assert "count me" in reply.content[0].text


def requests_by_worker(metrics_dir: Path) -> dict[str, float]:
    """Each worker's own count of served requests, read from its own file."""
    counts = {}
    for path in metrics_dir.glob("counter_*.db"):
        merged = MultiProcessCollector.merge([str(path)])
        counts[path.stem.rsplit("_", 1)[1]] = sum(
            sample.value
            for family in merged
            for sample in family.samples
            if sample.name == "q2api_requests_total" and sample.labels == SERVED
        )
    return counts


def the_metrics_dir(temp_root: Path) -> Path:
    (directory,) = temp_root.glob("q2api-metrics-*")
    return directory


def test_metrics_with_two_workers_sum_the_requests_of_both(tmp_path):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    with (
        SimulatedUpstream.run_in_thread() as upstream,
        serve(tmp_path, upstream.env(), workers=2, TMPDIR=str(temp_root)) as server,
    ):
        metrics_dir = the_metrics_dir(temp_root)
        assert metrics_dir.stat().st_mode & 0o777 == 0o700
        sent = 0
        # Until both workers have served some: only then does a correct total prove the merge.
        # Requests go in concurrent batches: the kernel hands sequential connections mostly to one worker.
        with ThreadPoolExecutor(BATCH) as pool:
            while sent < 50 * BATCH and sum(count > 0 for count in requests_by_worker(metrics_dir).values()) < 2:
                batch = [pool.submit(ask_on_a_new_connection, server.base_url, stream=i % 2 == 0) for i in range(BATCH)]
                for request in batch:
                    request.result()
                sent += BATCH
        # A worker counts a stream just after its last byte: give the last ones a moment.
        server.wait_until(lambda: sum(requests_by_worker(metrics_dir).values()) == sent, timeout=10)
        by_worker = requests_by_worker(metrics_dir)
        assert sum(count > 0 for count in by_worker.values()) == 2, by_worker

        for _ in range(4):  # whichever worker answers the scrape, the total is the same
            exposed = Scrape(server.get_text("/metrics"))
            assert exposed.value("q2api_requests_total", **SERVED) == sent == sum(by_worker.values())
            assert exposed.value("q2api_upstream_attempts_total", outcome="ok") == sent
            assert exposed.value("q2api_time_to_first_token_seconds_count", model=SERVED["model"]) == sent
            assert exposed.value("q2api_active_streams") == 0
            assert exposed.value("q2api_account_ready", account_id="env", account="environment") == 1
        assert_no_secret("\n".join(server.lines) + exposed.text)
    # The run's metrics directory goes with it.
    assert not list(temp_root.iterdir())


def test_serve_warns_about_misspelt_settings_without_their_values_and_cleans_up_after_sigterm(tmp_path):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    misspelt_secret = "rt-MISSPELT-NEVER-PRINT-4c2a"
    (tmp_path / ".env").write_text(
        f"AMAZONQ_REFRESH_TOKNE={misspelt_secret}\nQ2API_FROBNICATE=1\nQ2API_CONNECT_TIMEOUT=10\n"
    )
    with (
        SimulatedUpstream.run_in_thread() as upstream,
        serve(
            tmp_path, upstream.env(), TMPDIR=str(temp_root), Q2API_LOG_LEVL="DEBUG", DEBUG_MESAGE_CONVERSION="true"
        ) as server,
    ):
        server.wait_for(lambda line: "Q2API_FROBNICATE" in line)
        the_metrics_dir(temp_root)  # exists while it runs
        log = "\n".join(server.lines)
        assert_warning(
            log, r"unknown setting Q2API_LOG_LEVL in the environment is ignored; did you mean Q2API_LOG_LEVEL\?"
        )
        assert_warning(
            log, r"unknown setting AMAZONQ_REFRESH_TOKNE in \.env is ignored; did you mean AMAZONQ_REFRESH_TOKEN\?"
        )
        assert_warning(log, r"unknown setting Q2API_FROBNICATE in \.env is ignored$")
        assert_warning(
            log,
            r"unknown setting DEBUG_MESAGE_CONVERSION in the environment is ignored; "
            r"did you mean DEBUG_MESSAGE_CONVERSION\?",
        )
        assert_warning(
            log, r"setting Q2API_CONNECT_TIMEOUT in \.env is deprecated and will be removed: the connect timeout"
        )
        assert misspelt_secret not in log
    # One worker runs inside the serving process, which uvicorn ends by re-raising SIGTERM: the
    # directory must go all the same.
    assert not list(temp_root.iterdir())


def assert_warning(log: str, pattern: str) -> None:
    assert re.search(r"\| WARNING \| " + pattern, log, re.MULTILINE), log


def assert_no_secret(text: str) -> None:
    for secret in (CLIENT_KEY, SIM_REFRESH_TOKEN, SIM_CLIENT_SECRET, "sim-access-"):
        assert secret not in text
