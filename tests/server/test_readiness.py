"""Ready means a request would be served now: the start-up line and `/readyz` say the same thing."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx2
import pytest

from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import CLIENT_KEY, ask, capture_logs, gateway_settings, sdk


async def test_a_gateway_without_accounts_does_not_log_that_it_is_ready(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        env = {key: value for key, value in sim.env().items() if not key.startswith("AMAZONQ_REFRESH")}
        settings = load_settings({**env, "Q2API_DATA_DIR": str(tmp_path), "Q2API_API_KEYS": CLIENT_KEY}, env_file=None)
        with capture_logs() as logs:
            async with running_gateway(settings) as url, httpx2.AsyncClient(base_url=url) as http:
                ready = await http.get("/readyz")
    assert ready.status_code == 503
    reason = ready.json()["reason"]
    assert not any(line.message.startswith("q2api ready") for line in logs.lines)
    [startup] = [line for line in logs.lines if "not ready" in line.message]
    assert startup.level == "WARNING"
    assert reason in startup.message  # the same words as /readyz
    assert "q2api accounts import" in startup.message and "q2api login" in startup.message  # what to do
    # One event, one line: nothing else says there is no account.
    assert [line.message for line in logs.lines if "no Amazon Q account" in line.message] == [startup.message]


async def test_an_account_resting_after_throttling_still_serves_and_readyz_says_ready(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        settings = gateway_settings(sim, tmp_path, Q2API_MAX_RETRIES="0")
        with capture_logs() as logs:
            async with running_gateway(settings) as url, httpx2.AsyncClient(base_url=url) as http:
                sim.enqueue(scripts.throttled(retry_after=600))
                with pytest.raises(anthropic.RateLimitError):
                    await ask(sdk(url))
                health = (await http.get("/healthz")).json()
                assert [account["health"] for account in health["accounts"]] == ["throttled"]

                ready = await http.get("/readyz")
                # The resting account is the one the next request goes to, and it is served.
                assert (await ask(sdk(url), "still there?")).endswith("You said: still there?")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "note": "serving on resting accounts: 1 throttled"}
    assert any(line.message.startswith("q2api ready: 1 Amazon Q account(s) serving") for line in logs.lines)
