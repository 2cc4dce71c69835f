"""Issue 31 item 4 through the running gateway, the simulated Amazon Q and the official SDKs: an upstream
answer that names its cause gets that cause's remedy.

* `INVALID_MODEL_ID` for a model the account's catalogue lists → the account's catalogue is read again
  and the request goes to another account that has the model, with one WARNING;
* a size-shaped 400 (`Improperly formed request` for a body over 1 MB, or `Input content length exceeds
  threshold`) → Anthropic's `prompt is too long` naming the size (the OpenAI doors'
  `context_length_exceeded`), and a body at least that large is answered by the gateway itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from q2api.accounts.store import SqliteAccountStore
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import CLIENT_KEY, MODEL, capture_logs, gateway_settings, sdk, user
from tests.support.metrics_scrape import Scrape

Q_MODEL = "claude-sonnet-5.5"  # MODEL's id at Amazon Q
REFUSAL_LINE = "Amazon Q refused a model the account's catalogue lists (INVALID_MODEL_ID)"


@contextlib.asynccontextmanager
async def two_accounts(sim: SimulatedUpstream, data_dir: Path) -> AsyncIterator[str]:
    store = SqliteAccountStore(data_dir)
    await store.add(auth_method="social", refresh_token="rt-refusing", label="refusing")
    await store.add(auth_method="social", refresh_token="rt-serving", label="serving")
    settings = load_settings(
        {
            "AMAZONQ_ENDPOINT": sim.url,
            "AMAZONQ_OIDC_ENDPOINT": sim.oidc_url,
            "AMAZONQ_KIRO_REFRESH_ENDPOINT": sim.kiro_refresh_url,
            "Q2API_DATA_DIR": str(data_dir),
            "Q2API_API_KEYS": CLIENT_KEY,
        },
        env_file=None,
    )
    async with running_gateway(settings) as url:
        yield url


def catalogue_reads(sim: SimulatedUpstream) -> int:
    return sum(1 for _, operation, _ in sim.services.requests if operation == "ListAvailableModels")


async def test_invalid_model_id_for_a_listed_model_rereads_the_catalogue_and_reroutes_the_request(
    tmp_path: Path,
) -> None:
    async with SimulatedUpstream() as sim:
        # Both catalogues list the model; Amazon Q refuses it for one account all the same (9router#2882).
        sim.services.refused_models_by_account["rt-refusing"] = {Q_MODEL}
        with capture_logs() as logs:
            async with two_accounts(sim, tmp_path) as url, httpx2.AsyncClient(base_url=url) as http, sdk(url) as client:
                before = Scrape((await http.get("/metrics")).text)
                reads_before = catalogue_reads(sim)
                for turn in range(4):
                    reply = await client.messages.create(model=MODEL, max_tokens=32, messages=[user(f"turn {turn}")])
                    assert f"turn {turn}" in reply.content[0].text
                assert await sim.wait_until(lambda: catalogue_reads(sim) > reads_before)
                scrape = Scrape((await http.get("/metrics")).text).since(before)

    refusing_token = {token for token, account in sim.token_accounts.items() if account == "rt-refusing"}
    refused = [request for request in sim.requests if request.access_token in refusing_token]
    assert len(refused) == 1  # tried once, then never again for this model
    served = [request for request in sim.requests if request.access_token not in refusing_token]
    assert len(served) == 4
    warnings = [line for line in logs.lines if line.message.startswith(REFUSAL_LINE)]
    assert len(warnings) == 1 and warnings[0].level == "WARNING"
    assert [line for line in logs.lines if line.level == "WARNING" and "retrying" in line.message] == []
    assert "account=refusing" in warnings[0].message and f"model={Q_MODEL}" in warnings[0].message
    assert scrape.value("q2api_upstream_model_refusals_total", outcome="rerouted") == 1


async def test_invalid_model_id_with_no_other_account_is_the_clients_answer(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        sim.services.refused_models_by_account[sim.env()["AMAZONQ_REFRESH_TOKEN"]] = {Q_MODEL}
        settings = gateway_settings(sim, tmp_path)
        async with running_gateway(settings) as url, sdk(url) as client:
            with pytest.raises(anthropic.BadRequestError) as caught:
                await client.messages.create(model=MODEL, max_tokens=32, messages=[user("only one account")])
    assert "Invalid model id" in caught.value.message
    assert len(sim.requests) == 1  # no retry on the same account


def big_conversation(total_bytes: int) -> list[dict[str, Any]]:
    """A conversation of about `total_bytes` of text, in turns small enough for one Amazon Q message each."""
    turn = "The quick brown fox jumps over the lazy dog. " * 4000  # 180 KB
    messages: list[dict[str, Any]] = []
    while sum(len(message["content"]) for message in messages) < total_bytes:
        messages += [user(turn), {"role": "assistant", "content": "noted"}]
    return [*messages, user("summarise")]


@pytest.mark.parametrize(
    ("limit", "refusal"),
    [
        (1_300_000, scripts.improperly_formed()),  # JW #73: 1.3 MB refused with no cause named
        (1_300_000, None),  # the assumptions' "Input content length exceeds threshold." (KLB PR #26)
    ],
    ids=["improperly-formed", "content-length"],
)
async def test_a_body_refused_for_its_size_is_prompt_too_long_and_a_larger_one_is_answered_locally(
    tmp_path: Path, limit: int, refusal: scripts.ErrorReply | None
) -> None:
    async with SimulatedUpstream() as sim:
        sim.body_limit, sim.body_limit_reply = limit, refusal
        settings = gateway_settings(sim, tmp_path, Q2API_MODEL_DISCOVERY="false")
        async with running_gateway(settings) as url, httpx2.AsyncClient(base_url=url) as http, sdk(url) as client:
            before = Scrape((await http.get("/metrics")).text)
            conversation = big_conversation(1_500_000)
            with pytest.raises(anthropic.BadRequestError) as upstream_said:
                await client.messages.create(model=MODEL, max_tokens=32, messages=conversation)
            calls_after_refusal = len(sim.requests)
            with pytest.raises(anthropic.BadRequestError) as gateway_said:
                await client.messages.create(model=MODEL, max_tokens=32, messages=[*conversation, user("more")])
            with pytest.raises(anthropic.BadRequestError) as streamed:
                await client.messages.create(model=MODEL, max_tokens=32, messages=conversation, stream=True)
            openai_client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=CLIENT_KEY, max_retries=0)
            async with openai_client:
                with pytest.raises(openai.BadRequestError) as openai_said:
                    await openai_client.chat.completions.create(model=MODEL, messages=conversation)  # type: ignore[arg-type]
                with pytest.raises(openai.BadRequestError) as responses_said:
                    await openai_client.responses.create(model=MODEL, input=conversation)  # type: ignore[arg-type]
            small = await client.messages.create(model=MODEL, max_tokens=32, messages=[user("small still works")])
            scrape = Scrape((await http.get("/metrics")).text).since(before)

    assert calls_after_refusal == 1
    assert len(sim.requests) == 2  # the refused body, then only the small one: the others never left
    for caught in (upstream_said, gateway_said, streamed):
        assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        message = caught.value.body["error"]["message"]  # type: ignore[index]
        assert message.startswith("prompt is too long: ") and " tokens > " in message and "-byte request" in message
    refused_size = len(sim.requests[0].raw)
    assert f"{refused_size:,}-byte" in upstream_said.value.body["error"]["message"]  # type: ignore[index]
    assert "not sent" in gateway_said.value.body["error"]["message"]  # type: ignore[index]
    assert openai_said.value.code == responses_said.value.code == "context_length_exceeded"
    assert "small still works" in small.content[0].text
    assert scrape.value("q2api_upstream_size_refusals_total", answered_by="upstream") == 1
    assert scrape.value("q2api_upstream_size_refusals_total", answered_by="local") == 4


async def test_improperly_formed_for_a_small_body_stays_a_plain_invalid_request(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        sim.enqueue(scripts.improperly_formed())
        settings = gateway_settings(sim, tmp_path, Q2API_MODEL_DISCOVERY="false")
        async with running_gateway(settings) as url, sdk(url) as client:
            with pytest.raises(anthropic.BadRequestError) as caught:
                await client.messages.create(model=MODEL, max_tokens=32, messages=[user("a small body")])
    assert not caught.value.message.startswith("prompt is too long")
    assert "Improperly formed request" in caught.value.message
