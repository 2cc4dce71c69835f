"""What the console reads besides accounts: the activity ring, the model catalogue, and when a rest ends."""

from __future__ import annotations

import datetime
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import httpx2
import pytest

from q2api.server.activity import ACTIVITY_SIZE, ActivityLog
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.testing import scripts
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, MODEL, Gateway, ask, open_gateway, sdk

SECRET_PROMPT = "the launch code is swordfish-7731"


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[tuple[Gateway, httpx2.AsyncClient]]:
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY, Q2API_MAX_RETRIES="0") as gateway:
        async with httpx2.AsyncClient(
            base_url=gateway.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20
        ) as http:
            yield gateway, http


async def test_activity_lists_the_last_requests_newest_first_without_their_contents(admin) -> None:
    gateway, http = admin
    assert (await http.get("/admin/api/activity")).json()["requests"] == []
    gateway.sim.enqueue(scripts.text_reply("Hello there", output_tokens=3))
    assert await ask(gateway.client, SECRET_PROMPT, stream=True) == "Hello there"
    async with sdk(gateway.base_url, api_key="not-a-client-key") as stranger:
        with pytest.raises(anthropic.AuthenticationError):
            await ask(stranger, SECRET_PROMPT)

    answer = (await http.get("/admin/api/activity")).json()
    refused, served = answer["requests"]
    assert answer["size"] == ACTIVITY_SIZE
    assert served["route"] == "/v1/messages" and served["model"] == MODEL and served["stream"] is True
    assert served["status"] == 200 and served["error"] is None and served["stop_reason"] == "end_turn"
    assert served["account"] == "environment"
    assert served["output_tokens"] == 3 and served["input_tokens"] > 0
    assert 0 < served["ttft_ms"] <= served["duration_ms"]
    sent_at = datetime.datetime.fromisoformat(served["time"])
    assert abs(sent_at.timestamp() - time.time()) < 60
    assert refused["status"] == 401 and refused["error"] == "authentication_error" and refused["account"] == "-"
    assert refused["ttft_ms"] is None
    assert SECRET_PROMPT not in str(answer) and CLIENT_KEY not in str(answer)


async def test_activity_limit_is_checked(admin) -> None:
    gateway, http = admin
    for _ in range(3):
        gateway.sim.enqueue(scripts.text_reply("ok"))
        await ask(gateway.client)
    assert len((await http.get("/admin/api/activity", params={"limit": "2"})).json()["requests"]) == 2
    for bad in ("0", "-1", "abc", str(ACTIVITY_SIZE + 1)):
        response = await http.get("/admin/api/activity", params={"limit": bad})
        assert response.status_code == 400, bad
        assert "limit" in response.json()["error"]["message"]


def test_the_ring_keeps_only_the_newest_entries() -> None:
    ring = ActivityLog(size=3, clock=lambda: 1_800_000_000.0)
    for number in range(5):
        ring.record(Exchange(request_id=f"req_{number}"))
    assert [entry["request_id"] for entry in ring.latest(10)] == ["req_4", "req_3", "req_2"]
    assert [entry["request_id"] for entry in ring.latest(1)] == ["req_4"]


async def test_models_are_the_catalogue_clients_see(admin) -> None:
    gateway, http = admin
    async with gateway.http() as client:
        listed = (await client.get("/v1/models", params={"limit": "1000"})).json()["data"]
    catalogue = (await http.get("/admin/api/models")).json()["data"]
    assert catalogue == listed and catalogue
    assert all(model["max_input_tokens"] > 0 for model in catalogue)


async def test_a_resting_account_says_when_its_rest_ends(admin) -> None:
    gateway, http = admin
    (account,) = (await http.get("/admin/api/accounts")).json()["accounts"]
    assert account["health"] == "ready" and account["health_until"] is None
    gateway.sim.enqueue(scripts.http_error(429, "ThrottlingException", "Rate exceeded", retry_after=120))
    with pytest.raises(anthropic.RateLimitError):
        await ask(gateway.client)
    (account,) = (await http.get("/admin/api/accounts")).json()["accounts"]
    assert account["health"] == "throttled"
    until = datetime.datetime.fromisoformat(account["health_until"]).timestamp()
    assert time.time() + 60 < until <= time.time() + 121
