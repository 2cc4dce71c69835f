"""Per-account catalogues and credits through the running gateway: a request only goes to an
account that may use its model, and an account whose credits are used up rests before a request
fails on it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import httpx2
import pytest

from q2api.accounts.store import SqliteAccountStore
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_services import catalogue_entry, usage_document
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import CLIENT_KEY, sdk, user

ACCOUNTS = {"rt-alpha": "alpha", "rt-beta": "beta"}  # refresh token -> label


@contextlib.asynccontextmanager
async def two_account_gateway(sim: SimulatedUpstream, data_dir: Path) -> AsyncIterator[str]:
    store = SqliteAccountStore(data_dir)
    for refresh_token, label in ACCOUNTS.items():
        await store.add(auth_method="social", refresh_token=refresh_token, label=label)
    settings = load_settings(
        {
            "AMAZONQ_ENDPOINT": sim.url,
            "AMAZONQ_KIRO_REFRESH_ENDPOINT": sim.kiro_refresh_url,
            "Q2API_DATA_DIR": str(data_dir),
            "Q2API_API_KEYS": CLIENT_KEY,
        },
        env_file=None,
    )
    async with running_gateway(settings) as url:
        yield url


def accounts_served(sim: SimulatedUpstream) -> list[str]:
    """The label of the account behind each GenerateAssistantResponse call, in order."""
    return [ACCOUNTS[sim.token_accounts[request.access_token]] for request in sim.requests]


async def ask(client: anthropic.AsyncAnthropic, sim: SimulatedUpstream, model: str) -> None:
    sim.enqueue(scripts.text_reply("ok"))
    await client.messages.create(model=model, max_tokens=32, messages=[user("hi")])


async def test_a_request_goes_only_to_an_account_whose_catalogue_has_its_model(tmp_path):
    async with SimulatedUpstream() as sim:
        sim.services.reject_unknown_models = True
        sim.services.catalogue_by_account = {
            "rt-alpha": [catalogue_entry("claude-opus-4.6")],
            "rt-beta": [catalogue_entry("amazon-nova-lite", input_types=("TEXT",))],
        }
        async with two_account_gateway(sim, tmp_path) as url:
            client = sdk(url)
            ids = [model.id async for model in client.models.list()]
            for _ in range(3):
                await ask(client, sim, "amazon-nova-lite")
                await ask(client, sim, "claude-opus-4-6")
    assert sorted(ids) == ["amazon-nova-lite", "claude-opus-4-6"]  # the union of both catalogues
    assert accounts_served(sim) == ["beta", "alpha"] * 3


async def test_an_account_with_its_credits_used_up_rests_and_requests_go_to_the_other(tmp_path):
    resets_at = time.time() + 7 * 24 * 3600
    async with SimulatedUpstream() as sim:
        sim.services.usage_by_account = {
            "rt-alpha": usage_document(50, 50, subscription="KIRO FREE", resets_at=resets_at),
            "rt-beta": usage_document(3.5, 1000, subscription="KIRO PRO+"),
        }
        async with two_account_gateway(sim, tmp_path) as url:
            client = sdk(url)
            for _ in range(4):
                await ask(client, sim, "claude-sonnet-5-5")
            async with httpx2.AsyncClient(base_url=url) as http:
                health = (await http.get("/healthz")).json()
    # Never tried on the exhausted account: it rested before a request could fail on it.
    assert accounts_served(sim) == ["beta"] * 4
    by_label = {account["label"]: account for account in health["accounts"]}
    assert by_label["alpha"]["health"] == "quota_exhausted"
    # It rests until the credits reset (give or take the test's own run time).
    assert abs(by_label["alpha"]["resting_seconds"] - (resets_at - time.time())) < 120
    assert by_label["alpha"]["credits"]["used"] == by_label["alpha"]["credits"]["limit"] == 50
    assert by_label["beta"]["health"] == "ready"
    assert by_label["beta"]["credits"] == {
        "subscription": "KIRO PRO+",
        "used": 3.5,
        "limit": 1000,
        "resets_at": by_label["beta"]["credits"]["resets_at"],
    }
    assert by_label["beta"]["credits"]["resets_at"].endswith("Z")


@pytest.mark.slow  # waits for the reloader's tick
async def test_an_account_added_while_the_gateway_runs_serves_on_its_own_catalogue_at_once(tmp_path):
    # As `q2api accounts add` in another terminal: the row lands in the store, the reloader adds it.
    labels = {**ACCOUNTS, "rt-gamma": "gamma"}
    async with SimulatedUpstream() as sim:
        sim.services.reject_unknown_models = True  # as Amazon Q: 400 INVALID_MODEL_ID for an unlisted id
        sim.services.catalogue_by_account = {
            "rt-alpha": [catalogue_entry("claude-opus-4.6")],
            "rt-beta": [catalogue_entry("claude-haiku-4.5")],
            "rt-gamma": [catalogue_entry("amazon-nova-lite", input_types=("TEXT",))],
        }
        async with two_account_gateway(sim, tmp_path) as url:
            client = sdk(url)
            before = sorted([model.id async for model in client.models.list()])
            await SqliteAccountStore(tmp_path).add(auth_method="social", refresh_token="rt-gamma", label="gamma")
            seen: list[list[str]] = []
            deadline = time.monotonic() + 15
            while "amazon-nova-lite" not in (seen[-1] if seen else []):
                assert time.monotonic() < deadline, f"the new account's catalogue never arrived: {seen[-1:]}"
                seen.append(sorted([model.id async for model in client.models.list()]))
            for _ in range(3):
                await ask(client, sim, "claude-opus-4-6")
                await ask(client, sim, "amazon-nova-lite")
    assert before == ["claude-haiku-4-5", "claude-opus-4-6"]
    # Never the built-in table's models: only the new account's own one joined the list.
    assert all(set(snapshot) <= {*before, "amazon-nova-lite"} for snapshot in seen), seen
    # Each request went straight to the one account that lists its model (no refused call first).
    assert [labels[sim.token_accounts[request.access_token]] for request in sim.requests] == ["alpha", "gamma"] * 3
