"""Session affinity through the running gateway: a conversation stays on the account that served it.

Three accounts, a model that reasons natively: the simulated Amazon Q signs its reasoning per
account and refuses a history signature another account made (THINKING_SIGNATURE_INVALID), and
caches per account. Without affinity the pool's rotation sends each turn to the next account, so
every assertion below about "one account" and "no refusal" fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from websockets.asyncio.client import connect

from q2api.accounts.opening import open_account_store
from q2api.accounts.store import SqliteAccountStore
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.databases import TEST_SECRET_KEY, scratch_database_url
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, capture_logs, sdk, user
from tests.support.metrics_scrape import Scrape
from tests.support.serve_process import CLIENT_KEY as SERVE_CLIENT_KEY
from tests.support.serve_process import serve
from tests.support.tenant_stores import scratch_redis

NATIVE_MODEL = "claude-opus-4-8"  # listed with a reasoning schema: signed native reasoning
ACCOUNTS = {"rt-alpha": "alpha", "rt-beta": "beta", "rt-gamma": "gamma"}  # refresh token -> label
TURNS = 20
REFUSED = "thinking signature refused"


def accounts_env(sim: SimulatedUpstream) -> dict[str, str]:
    """The simulator's hosts and token service, without an environment account: the store's three serve."""
    return {"AMAZONQ_ENDPOINT": sim.url, "AMAZONQ_KIRO_REFRESH_ENDPOINT": sim.kiro_refresh_url}


async def add_accounts(store: Any) -> None:
    for refresh_token, label in ACCOUNTS.items():
        await store.add(auth_method="social", refresh_token=refresh_token, label=label)


@contextlib.asynccontextmanager
async def three_account_gateway(sim: SimulatedUpstream, data_dir: Path, **env: str) -> AsyncIterator[str]:
    await add_accounts(SqliteAccountStore(data_dir))
    settings = load_settings(
        {
            **accounts_env(sim),
            "Q2API_DATA_DIR": str(data_dir),
            "Q2API_API_KEYS": CLIENT_KEY,
            "Q2API_ADMIN_KEY": ADMIN_KEY,
            **env,
        },
        env_file=None,
    )
    async with running_gateway(settings) as url:
        yield url


def served_by(sim: SimulatedUpstream, since: int = 0) -> list[str]:
    """The label of the account behind each GenerateAssistantResponse call, in order."""
    return [ACCOUNTS[sim.token_accounts[request.access_token]] for request in sim.requests[since:]]


def history_signatures(body: dict[str, Any]) -> int:
    history = body["conversationState"].get("history", [])
    return sum("reasoningContent" in entry.get("assistantResponseMessage", {}) for entry in history)


class ClaudeCodeConversation:
    """A Claude Code-shaped conversation: its session header and metadata, adaptive thinking, the
    whole history (thinking blocks with their signatures included) sent back each turn."""

    def __init__(self) -> None:
        self.session = str(uuid.uuid4())
        self.messages: list[dict[str, Any]] = []

    async def turn(self, client: anthropic.AsyncAnthropic, n: int) -> None:
        users = [message for message in self.messages if message["role"] == "user"]
        for message in users[:-1]:  # the marks move to the newest two user messages, as Claude Code moves them
            message["content"] = [{"type": "text", "text": block["text"]} for block in message["content"]]
        marked = {"type": "text", "text": f"step {n}: go on", "cache_control": {"type": "ephemeral"}}
        self.messages.append({"role": "user", "content": [marked]})
        reply = await client.messages.create(
            model=NATIVE_MODEL,
            max_tokens=16_000,
            thinking={"type": "adaptive"},
            system=[{"type": "text", "text": "You are Claude Code."}],
            metadata={"user_id": f'{{"device_id":"d1","session_id":"{self.session}"}}'},
            messages=self.messages,
            extra_headers={"X-Claude-Code-Session-Id": self.session},
        )
        assert reply.content[0].type == "thinking" and reply.content[0].signature
        self.messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})


class CodexConversation:
    """A Codex-shaped conversation on the Responses door: `session-id` header and `prompt_cache_key` (its
    thread id), `store: false`, reasoning asked for with its encrypted content, the whole input sent back."""

    def __init__(self) -> None:
        self.thread = str(uuid.uuid4())
        self.items: list[Any] = []

    async def turn(self, client: openai.AsyncOpenAI, n: int) -> None:
        self.items.append({"role": "user", "content": [{"type": "input_text", "text": f"step {n}: go on"}]})
        response = await client.responses.create(
            model=NATIVE_MODEL,
            input=self.items,
            instructions="You are Codex.",
            store=False,
            reasoning={"effort": "medium"},
            include=["reasoning.encrypted_content"],
            prompt_cache_key=self.thread,
            extra_headers={"session-id": self.thread, "originator": "codex_cli_rs"},
        )
        reasoning = response.output[0]
        assert reasoning.type == "reasoning" and reasoning.encrypted_content
        self.items += [item.model_dump(exclude_none=True) for item in response.output]


async def scrape(url: str) -> Scrape:
    async with httpx2.AsyncClient(base_url=url) as http:
        return Scrape((await http.get("/metrics")).text)


@pytest.mark.slow  # twenty turns of a growing conversation
async def test_a_claude_code_conversation_stays_on_one_account_and_no_signature_is_refused(tmp_path):
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        sim.usage_frames = True  # cache figures per account, as Amazon Q reports them
        before = await scrape(url)
        client = sdk(url)
        conversation = ClaudeCodeConversation()
        with capture_logs() as logs:
            for n in range(TURNS):
                await conversation.turn(client, n)
            # Another conversation meanwhile is pinned on its own (to whichever account the pool gives it).
            await ClaudeCodeConversation().turn(client, 0)
        metrics = (await scrape(url)).since(before)
    accounts = served_by(sim)
    assert len(accounts) == TURNS + 1  # one call per turn: no signature refused, none sent again
    assert len(set(accounts[:TURNS])) == 1, accounts
    assert REFUSED not in logs.text
    # Every later turn sent the history's reasoning back, signed by the account that reads it.
    assert [history_signatures(request.body) for request in sim.requests[:TURNS]] == list(range(TURNS))
    assert metrics.value("q2api_session_turns_total", outcome="kept", why="-") == TURNS - 1
    assert metrics.value("q2api_session_turns_total", outcome="started", why="-") == 2
    assert metrics.total("q2api_session_turns_total", outcome="moved") == 0
    # The conversation's cache was read where it was written: on its one account, every turn after the first.
    cache_reads = {
        labels["account"]: metrics.value("q2api_cache_read_tokens_total", **labels)
        for labels in metrics.series("q2api_cache_read_tokens_total")
    }
    assert cache_reads[accounts[0]] > 0
    assert all(tokens == 0 for label, tokens in cache_reads.items() if label != accounts[0]), cache_reads


@pytest.mark.slow  # twenty turns of a growing conversation
async def test_a_codex_conversation_on_the_responses_door_stays_on_one_account(tmp_path):
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=CLIENT_KEY, max_retries=0)
        conversation = CodexConversation()
        with capture_logs() as logs:
            for n in range(TURNS):
                await conversation.turn(client, n)
    accounts = served_by(sim)
    assert len(accounts) == TURNS and len(set(accounts)) == 1, accounts
    assert REFUSED not in logs.text
    assert [history_signatures(request.body) for request in sim.requests] == list(range(TURNS))


@pytest.mark.slow  # a stored chain, read back each turn
async def test_a_stored_responses_chain_without_session_headers_stays_on_one_account(tmp_path):
    """`previous_response_id` alone (no session header, no cache key): the chain's turns share its first
    response's pin, so the signatures stored with it go back to the account that made them."""
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=CLIENT_KEY, max_retries=0)
        previous = None
        with capture_logs() as logs:
            for n in range(6):
                response = await client.responses.create(
                    model=NATIVE_MODEL,
                    input=f"step {n}: go on",
                    reasoning={"effort": "medium"},
                    include=["reasoning.encrypted_content"],
                    **({"previous_response_id": previous} if previous else {}),
                )
                previous = response.id
    accounts = served_by(sim)
    assert len(accounts) == 6 and len(set(accounts)) == 1, accounts
    assert REFUSED not in logs.text
    assert [history_signatures(request.body) for request in sim.requests] == list(range(6))


async def test_a_conversation_without_ids_follows_its_first_turn_and_one_shot_prompts_still_spread(tmp_path):
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        client = sdk(url)
        for _ in range(3):  # the same one-shot prompt three times: not held together, the pool spreads them
            await client.messages.create(model=NATIVE_MODEL, max_tokens=100, messages=[user("ping")])
        one_shots = served_by(sim)
        messages: list[dict[str, Any]] = [user("plan the refactor")]
        for n in range(5):  # no session id anywhere: known by its system prompt and first message
            reply = await client.messages.create(
                model=NATIVE_MODEL, max_tokens=16_000, thinking={"type": "adaptive"}, messages=messages
            )
            messages += [
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                user(f"and step {n}?"),
            ]
    assert len(set(one_shots)) == 3, one_shots
    conversation = served_by(sim, 3)
    assert len(conversation) == 5 and len(set(conversation)) == 1, conversation


@pytest.mark.slow  # waits for the pool to follow the store (its reload tick)
async def test_a_disabled_account_moves_its_conversation_once_and_the_turn_succeeds(tmp_path):
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        before = await scrape(url)
        client = sdk(url)
        conversation = ClaudeCodeConversation()
        with capture_logs() as logs:
            for n in range(5):
                await conversation.turn(client, n)
            pinned = served_by(sim)[-1]
            store = SqliteAccountStore(tmp_path)
            account = next(a for a in await store.accounts() if a.label == pinned)
            await store.update(account.id, enabled=False)
            await store.close()
            async with httpx2.AsyncClient(base_url=url) as http:
                deadline = time.monotonic() + 10
                while pinned in {a["label"] for a in (await http.get("/healthz")).json()["accounts"]}:
                    assert time.monotonic() < deadline, "the gateway never let the disabled account go"
                    await asyncio.sleep(0.1)
            moved_at = len(sim.requests)
            for n in range(5, 10):
                await conversation.turn(client, n)
        metrics = (await scrape(url)).since(before)
    after = served_by(sim, moved_at)
    assert pinned not in after and len(set(after)) == 1, after  # moved once, then kept on its new account
    # One call per turn: what only the old account accepted (its signatures on the first five turns) was
    # left out of the moved turn and of every later one, never refused; the new account's own were sent.
    assert len(after) == 5 and REFUSED not in logs.text
    assert [history_signatures(request.body) for request in sim.requests[moved_at:]] == [0, 1, 2, 3, 4]
    moves = [line for line in logs.text.splitlines() if "session moved:" in line]
    assert len(moves) == 1 and f"from={pinned} to={after[0]} why=disabled" in moves[0], moves
    assert metrics.value("q2api_session_turns_total", outcome="moved", why="disabled") == 1
    assert metrics.value("q2api_session_turns_total", outcome="kept", why="-") == 4 + 4
    assert "rt-" not in "".join(moves) and "sim-" not in "".join(moves)


async def test_a_throttled_account_moves_its_turn_at_once_and_the_conversation_stays_moved(tmp_path):
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        client = sdk(url)
        conversation = ClaudeCodeConversation()
        with capture_logs() as logs:
            for n in range(3):
                await conversation.turn(client, n)
            pinned = served_by(sim)[-1]
            sim.enqueue(scripts.throttled())  # the pinned account's answer to turn 4: it rests
            for n in range(3, 6):
                await conversation.turn(client, n)
    accounts = served_by(sim)
    assert accounts[:4] == [pinned] * 4  # turn 4 was tried on its account first
    moved_to = accounts[4]
    assert moved_to != pinned and accounts[4:] == [moved_to] * 3, accounts
    assert REFUSED not in logs.text
    moves = [line for line in logs.text.splitlines() if "session moved:" in line]
    assert len(moves) == 1 and f"from={pinned} to={moved_to} why=failed" in moves[0], moves


async def test_affinity_off_lets_the_pool_rotate(tmp_path):
    async with (
        SimulatedUpstream() as sim,
        three_account_gateway(sim, tmp_path, Q2API_SESSION_AFFINITY_SECONDS="0") as url,
    ):
        client = sdk(url)
        conversation = ClaudeCodeConversation()
        for n in range(3):
            await conversation.turn(client, n)
    assert len(set(served_by(sim))) > 1  # the control: without affinity the turns spread


# -- across workers and replicas ---------------------------------------------------------------------


async def conversation_on(targets: list[str], turns: int = TURNS) -> None:
    """One Claude Code conversation, its turns sent to `targets` in turn (replicas, or one port of workers)."""
    clients = [sdk(target, api_key=SERVE_CLIENT_KEY) for target in targets]
    conversation = ClaudeCodeConversation()
    for n in range(turns):
        await conversation.turn(clients[n % len(clients)], n)


def assert_stayed(sim: SimulatedUpstream, lines: list[str], metrics_text: str) -> None:
    accounts = served_by(sim)
    assert len(accounts) == TURNS and len(set(accounts)) == 1, accounts
    assert not any(REFUSED in line or "Traceback" in line for line in lines)
    metrics = Scrape(metrics_text)
    assert metrics.value("q2api_session_turns_total", outcome="kept", why="-") == TURNS - 1
    assert metrics.total("q2api_session_turns_total", outcome="moved") == 0


@pytest.mark.parametrize("pinned_in", ["store", "redis"])
async def test_a_conversation_stays_on_one_account_across_two_workers(tmp_path: Path, pinned_in: str) -> None:
    with contextlib.ExitStack() as stack:
        extra = stack.enter_context(scratch_redis()).env if pinned_in == "redis" else {}
        await add_accounts(SqliteAccountStore(tmp_path / "data"))
        upstream = stack.enter_context(SimulatedUpstream.run_in_thread())
        server = stack.enter_context(serve(tmp_path, accounts_env(upstream.sim), workers=2, **extra))
        await conversation_on([server.base_url])
        assert_stayed(upstream.sim, server.lines, server.get_text("/metrics"))


async def test_a_conversation_stays_on_one_account_across_two_replicas_on_postgresql(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        database_url = stack.enter_context(scratch_database_url("postgresql"))
        store = await open_account_store(database_url, tmp_path, TEST_SECRET_KEY)
        try:
            await add_accounts(store)
        finally:
            await store.close()
        upstream = stack.enter_context(SimulatedUpstream.run_in_thread())
        env = {**accounts_env(upstream.sim), "Q2API_DATABASE_URL": database_url, "Q2API_SECRET_KEY": TEST_SECRET_KEY}
        replicas = []
        for n in range(2):
            (tmp_path / f"r{n}").mkdir()
            replicas.append(stack.enter_context(serve(tmp_path / f"r{n}", env)))
        await conversation_on([replica.base_url for replica in replicas])
        accounts = served_by(upstream.sim)
        assert len(accounts) == TURNS and len(set(accounts)) == 1, accounts
        kept = sum(
            Scrape(replica.get_text("/metrics")).value("q2api_session_turns_total", outcome="kept", why="-")
            for replica in replicas
        )
        assert kept == TURNS - 1  # every turn after the first found its pin, whichever replica it reached
        assert not any(REFUSED in line for replica in replicas for line in replica.lines)


@pytest.mark.slow  # ten turns over a socket
async def test_a_codex_conversation_over_the_responses_websocket_stays_on_one_account(tmp_path):
    """Codex's own transport: one socket, its handshake carrying `session-id` / `thread-id`, each turn a
    `response.create` that continues the connection's last response (`store: false`)."""
    thread = str(uuid.uuid4())
    headers = {"authorization": f"Bearer {CLIENT_KEY}", "session-id": thread, "thread-id": thread}
    async with SimulatedUpstream() as sim, three_account_gateway(sim, tmp_path) as url:
        with capture_logs() as logs:
            async with connect(url.replace("http://", "ws://") + "/v1/responses", additional_headers=headers) as socket:
                previous = None
                for n in range(10):
                    message = {
                        "type": "response.create",
                        "model": NATIVE_MODEL,
                        "input": [{"role": "user", "content": [{"type": "input_text", "text": f"step {n}"}]}],
                        "store": False,
                        "reasoning": {"effort": "medium"},
                        "include": ["reasoning.encrypted_content"],
                        "prompt_cache_key": thread,
                        **({"previous_response_id": previous} if previous else {}),
                    }
                    await socket.send(json.dumps(message))
                    while (event := json.loads(await asyncio.wait_for(socket.recv(), 30)))["type"] not in (
                        "response.completed",
                        "response.failed",
                        "error",
                    ):
                        pass
                    assert event["type"] == "response.completed", event
                    previous = event["response"]["id"]
    accounts = served_by(sim)
    assert len(accounts) == 10 and len(set(accounts)) == 1, accounts
    assert REFUSED not in logs.text
    assert [history_signatures(request.body) for request in sim.requests] == list(range(10))
