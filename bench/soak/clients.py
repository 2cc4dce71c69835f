"""The soak's clients: every door, as the official SDKs send it, each in a loop until the run ends.

Every request ends as one `Answer` in the journal. The SDKs never retry here (`max_retries=0`), so
each status the gateway gave is seen as it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import anthropic
import openai

from bench.soak.deployments import ENV_CLIENT_KEY, Fleet
from bench.soak.journal import CLIENT_GAVE_UP, ENV_KEY, Journal, StoredResponse
from bench.soak.upstream import FAULTS, TOOL_NAME, fault_marker, marker
from bench.soak.workers import KeptConnection, connections_to_every_worker

MODEL = "claude-sonnet-5-5"
OTHER_MODEL = "claude-haiku-5-5"
TIMEOUT = 30.0
IN_STREAM_ERROR = 600  # a stream that began with 200 and ended with an error event
REVOCATION_SECONDS = 5.0  # a revoked key is refused everywhere within this
REVOCATION_OVERTIME = 30.0  # seconds the probes may go on past the run, waiting for a late revocation
TOOL: Any = {
    "name": TOOL_NAME,
    "description": "Read the notes on a topic.",
    "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
}
WEB_SEARCH: Any = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}

# Store keys the clients use, with the limits they are created with (the admin API's body).
KEY_LIMITS: dict[str, dict[str, Any]] = {
    "soak-json": {},
    "soak-chat": {},
    "soak-responses": {},
    "soak-rpm": {"rpm": 40},
    "soak-concurrency": {"max_concurrent": 2},
    "soak-budget": {"credits_per_day": 0.25},
    "soak-model": {"models": [MODEL]},
    "soak-revoke": {},
}


@dataclasses.dataclass
class Outcome:
    status: int = 200
    error: str = ""
    worker: int | None = None
    request_id: str | None = None  # the gateway's `request-id`, where an answer came back

    def came_from(self, source: object) -> None:
        """Note the request id an SDK object (a message, a stream, an error) carries."""
        self.request_id = request_id_of(source) or self.request_id


def request_id_of(source: object) -> str | None:
    found = getattr(source, "_request_id", None) or getattr(source, "request_id", None)
    if isinstance(found, str):
        return found
    headers = getattr(getattr(source, "response", None), "headers", None)
    return headers.get("request-id") if headers is not None else None


@dataclasses.dataclass
class Traffic:
    """What every client shares: the fleet, the journal, the keys, and when to stop."""

    fleet: Fleet
    journal: Journal
    keys: dict[str, str]  # store key label → the key itself
    deadline: float  # time.monotonic() after which no client starts a request
    rng: random.Random
    revoking: bool = False  # the operators revoke the probed key in this phase: probe until it can be judged
    _anthropic: dict[tuple[str, str], anthropic.AsyncAnthropic] = dataclasses.field(default_factory=dict)
    _openai: dict[tuple[str, str], openai.AsyncOpenAI] = dataclasses.field(default_factory=dict)

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def target(self) -> str:
        return self.rng.choice(self.fleet.targets)

    def secret(self, label: str) -> str:
        return ENV_CLIENT_KEY if label == ENV_KEY else self.keys[label]

    def anthropic(self, target: str, label: str) -> anthropic.AsyncAnthropic:
        key = (target, label)
        if key not in self._anthropic:
            self._anthropic[key] = anthropic.AsyncAnthropic(
                base_url=target, api_key=self.secret(label), max_retries=0, timeout=TIMEOUT
            )
        return self._anthropic[key]

    def openai(self, target: str, label: str) -> openai.AsyncOpenAI:
        key = (target, label)
        if key not in self._openai:
            self._openai[key] = openai.AsyncOpenAI(
                base_url=target + "/v1", api_key=self.secret(label), max_retries=0, timeout=TIMEOUT
            )
        return self._openai[key]

    async def close(self) -> None:
        for claude in self._anthropic.values():
            await claude.close()
        for openai_client in self._openai.values():
            await openai_client.close()

    @contextlib.asynccontextmanager
    async def recorded(
        self, actor: str, key: str, door: str, target: str, *, faulted: bool = False
    ) -> AsyncIterator[Outcome]:
        """One request's answer into the journal, whichever way it ends."""
        outcome = Outcome()
        started = time.time()
        try:
            yield outcome
        except (anthropic.APIStatusError, openai.APIStatusError) as exc:
            outcome.came_from(exc)
            # A stream's error event reaches the SDK after the 200: it carries that status.
            outcome.status = IN_STREAM_ERROR if exc.status_code == 200 else exc.status_code
            outcome.error = f"{type(exc).__name__}: {exc.message}"
        except (
            anthropic.APIConnectionError,
            openai.APIConnectionError,
            aiohttp.ClientError,
            asyncio.IncompleteReadError,
            OSError,
            TimeoutError,
        ) as exc:
            outcome.status = CLIENT_GAVE_UP
            outcome.error = f"{type(exc).__name__}: {exc}"
        except (anthropic.APIError, openai.APIError) as exc:
            outcome.came_from(exc)
            outcome.status = IN_STREAM_ERROR
            outcome.error = f"{type(exc).__name__}: {exc}"
        self.journal.answer(
            actor=actor,
            key=key,
            door=door,
            target=target,
            status=outcome.status,
            started=started,
            faulted=faulted,
            error=outcome.error,
            worker=outcome.worker,
            request_id=outcome.request_id,
        )


def user(text: str) -> Any:
    """A user message, as both SDKs take it."""
    return {"role": "user", "content": text}


async def claude_tool_rounds(traffic: Traffic) -> None:
    """Claude Code's shape: a streamed turn that calls a tool, then the turn that carries its result."""
    while traffic.running():
        messages: list[Any] = [user(f"{marker('tools')} read the notes")]
        target = traffic.target()
        async with traffic.recorded("claude-tools", ENV_KEY, "messages", target) as outcome:
            client = traffic.anthropic(target, ENV_KEY)
            async with client.messages.stream(model=MODEL, max_tokens=256, tools=[TOOL], messages=messages) as stream:
                outcome.came_from(stream)
                first = await stream.get_final_message()
            if first.stop_reason != "tool_use":
                outcome.error = f"expected a tool call, got stop_reason {first.stop_reason}"
        if outcome.status != 200 or outcome.error:
            continue
        call = next(block for block in first.content if block.type == "tool_use")
        messages += [
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "notes: soak"}]},
        ]
        target = traffic.target()  # the next turn may reach another process
        async with traffic.recorded("claude-tools", ENV_KEY, "messages", target) as outcome:
            client = traffic.anthropic(target, ENV_KEY)
            async with client.messages.stream(model=MODEL, max_tokens=256, tools=[TOOL], messages=messages) as stream:
                outcome.came_from(stream)
                second = await stream.get_final_message()
            if second.stop_reason != "end_turn":
                outcome.error = f"expected the turn to end, got stop_reason {second.stop_reason}"


async def claude_json(traffic: Traffic) -> None:
    while traffic.running():
        target = traffic.target()
        async with traffic.recorded("claude-json", "soak-json", "messages", target) as outcome:
            message = await traffic.anthropic(target, "soak-json").messages.create(
                model=MODEL, max_tokens=64, messages=[user(f"{marker('plain')} hello")], metadata={"user_id": "soak"}
            )
            outcome.came_from(message)
            if not message.content:
                outcome.error = "an empty reply"


async def chat_completions(traffic: Traffic) -> None:
    stream = False
    while traffic.running():
        target = traffic.target()
        stream = not stream
        async with traffic.recorded("chat", "soak-chat", "chat", target) as outcome:
            client = traffic.openai(target, "soak-chat")
            messages: Any = [user(f"{marker('plain')} hello")]
            if stream:
                chunks = await client.chat.completions.create(model=MODEL, messages=messages, stream=True)
                outcome.came_from(chunks)
                text = "".join([chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices])
            else:
                completion = await client.chat.completions.create(model=MODEL, messages=messages)
                outcome.came_from(completion)
                text = completion.choices[0].message.content or ""
            if not text:
                outcome.error = "an empty reply"


async def responses_chains(traffic: Traffic, turns: int = 3) -> None:
    """Stored Responses conversations continued with `previous_response_id`, turn by turn across processes."""
    while traffic.running():
        previous: str | None = None
        for turn in range(turns):
            target = traffic.target()
            async with traffic.recorded("responses", "soak-responses", "responses", target) as outcome:
                client = traffic.openai(target, "soak-responses")
                response = await client.responses.create(
                    model=MODEL,
                    input=f"{marker('plain')} turn {turn}",
                    previous_response_id=previous,
                    store=True,
                    max_output_tokens=64,
                )
                outcome.came_from(response)
                traffic.journal.stored.append(StoredResponse(response.id, "soak-responses", target))
                previous = response.id
            if outcome.status != 200:
                break


async def web_search(traffic: Traffic) -> None:
    """Claude Code's WebSearch: a request whose only tool is the web search, asking for one query."""
    while traffic.running():
        target = traffic.target()
        async with traffic.recorded("web-search", ENV_KEY, "messages", target) as outcome:
            message = await traffic.anthropic(target, ENV_KEY).messages.create(
                model=MODEL,
                max_tokens=128,
                tools=[WEB_SEARCH],
                messages=[user("Perform a web search for the query: soak test news")],
            )
            outcome.came_from(message)
            if not any(block.type == "web_search_tool_result" for block in message.content):
                outcome.error = "no web_search_tool_result block"


async def faults(traffic: Traffic) -> None:
    """Requests that ask the simulated Amazon Q to fail them: throttled, 500, reset, slow first byte, cut."""
    while traffic.running():
        kind = traffic.rng.choice(FAULTS)
        target = traffic.target()
        text = f"{fault_marker(kind)} please"
        if traffic.rng.random() < 0.5:
            async with traffic.recorded(f"fault-{kind}", ENV_KEY, "messages", target, faulted=True) as outcome:
                client = traffic.anthropic(target, ENV_KEY)
                async with client.messages.stream(model=MODEL, max_tokens=64, messages=[user(text)]) as stream:
                    outcome.came_from(stream)
                    await stream.get_final_message()
        else:
            async with traffic.recorded(f"fault-{kind}", ENV_KEY, "chat", target, faulted=True) as outcome:
                completion = await traffic.openai(target, ENV_KEY).chat.completions.create(
                    model=MODEL,
                    messages=[user(text)],
                )
                outcome.came_from(completion)


async def _plain_request(traffic: Traffic, actor: str, label: str, *, slow: bool = False) -> None:
    target = traffic.target()
    async with traffic.recorded(actor, label, "messages", target) as outcome:
        text = f"{marker('slow' if slow else 'plain')} hello"
        message = await traffic.anthropic(target, label).messages.create(
            model=MODEL, max_tokens=64, messages=[user(text)]
        )
        outcome.came_from(message)


async def over_rate(traffic: Traffic) -> None:
    """A key with a limit of 40 requests a minute, asked for about 240."""
    sent: set[asyncio.Task[None]] = set()
    while traffic.running():
        task = asyncio.get_running_loop().create_task(_plain_request(traffic, "over-rpm", "soak-rpm"))
        sent.add(task)
        task.add_done_callback(sent.discard)
        await asyncio.sleep(0.25)
    if sent:
        await asyncio.wait(sent)


async def over_concurrency(traffic: Traffic, senders: int = 4) -> None:
    """A key allowed 2 requests in flight, used by 4 senders of slow requests."""

    async def sender() -> None:
        while traffic.running():
            await _plain_request(traffic, "over-concurrency", "soak-concurrency", slow=True)

    await asyncio.gather(*(sender() for _ in range(senders)))


async def over_budget(traffic: Traffic) -> None:
    """A key with 0.25 credits a day, spent at about 0.01 credits a request."""
    while traffic.running():
        await _plain_request(traffic, "over-budget", "soak-budget")
        await asyncio.sleep(0.1)


async def restricted_model(traffic: Traffic) -> None:
    """A key allowed one model, asking on every door for it and for another."""
    doors: list[Callable[[str, str], Awaitable[object]]] = []

    def on_messages(target: str, model: str) -> Awaitable[object]:
        return traffic.anthropic(target, "soak-model").messages.create(
            model=model, max_tokens=32, messages=[user(f"{marker('plain')} hi")]
        )

    def on_chat(target: str, model: str) -> Awaitable[object]:
        return traffic.openai(target, "soak-model").chat.completions.create(
            model=model,
            messages=[user(f"{marker('plain')} hi")],
        )

    def on_responses(target: str, model: str) -> Awaitable[object]:
        return traffic.openai(target, "soak-model").responses.create(
            model=model, input=f"{marker('plain')} hi", store=False, max_output_tokens=32
        )

    doors = [on_messages, on_chat, on_responses]
    names = ["messages", "chat", "responses"]
    turn = 0
    while traffic.running():
        door = turn % len(doors)
        model = MODEL if (turn // len(doors)) % 2 == 0 else OTHER_MODEL
        target = traffic.target()
        actor = "model-allowed" if model == MODEL else "model-refused"
        async with traffic.recorded(actor, "soak-model", names[door], target) as outcome:
            outcome.came_from(await doors[door](target, model))
        turn += 1


async def revocation_probes(traffic: Traffic, interval: float = 0.3) -> None:
    """A key revoked mid-run (by the operator), tried on connections held to every worker of every process."""
    pins = await connections_to_every_worker(traffic.fleet, lambda connection: _probe_once(traffic, connection))
    try:
        await asyncio.gather(*(_probe_loop(traffic, pin, interval) for pin in pins))
    finally:
        for pin in pins:
            pin.close()


async def _probe_once(traffic: Traffic, connection: KeptConnection) -> None:
    async with traffic.recorded("revocation-probe", "soak-revoke", "messages", connection.target) as outcome:
        document = {"model": MODEL, "max_tokens": 16, "messages": [user(f"{marker('plain')} probe")]}
        headers = {"x-api-key": traffic.keys["soak-revoke"], "anthropic-version": "2023-06-01"}
        outcome.status, _ = await asyncio.wait_for(
            connection.request("POST", "/v1/messages", document, headers), TIMEOUT
        )
        outcome.request_id = connection.last_request_id
        outcome.worker = await connection.worker(traffic.fleet.worker_pids()[connection.target])


async def _probe_loop(traffic: Traffic, connection: KeptConnection, interval: float) -> None:
    # Past the run's end if need be, until the revocation is old enough to be judged (or it never comes).
    overtime = traffic.deadline + REVOCATION_OVERTIME
    while traffic.running() or (traffic.revoking and not _revocation_judged(traffic) and time.monotonic() < overtime):
        await _probe_once(traffic, connection)
        await asyncio.sleep(interval)


def _revocation_judged(traffic: Traffic) -> bool:
    revoked = traffic.journal.revoked.get("soak-revoke")
    return revoked is not None and time.time() > revoked + REVOCATION_SECONDS + 1.0


CLIENTS: tuple[Callable[[Traffic], Awaitable[None]], ...] = (
    claude_tool_rounds,
    claude_tool_rounds,
    claude_json,
    chat_completions,
    responses_chains,
    responses_chains,
    web_search,
    faults,
    over_rate,
    over_concurrency,
    over_budget,
    restricted_model,
    revocation_probes,
)
