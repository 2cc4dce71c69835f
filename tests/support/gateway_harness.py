"""The real gateway on loopback, the simulated Amazon Q upstream, and the official SDK as client.

    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gw:
        gw.sim.enqueue(scripts.text_reply("Hello"))
        message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("hi")])

Also: settings and the SDK client for tests that start gateways themselves, the
Anthropic error envelope check, a raw HTTP client for what the SDK hides (pings,
statuses of a held stream), an SSE reader, a loguru capture that renders
tracebacks too, and the secrets a log or an error must never contain.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from loguru import logger

from q2api.settings import Settings, load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.scripts import ErrorReply, Reply, StreamReply
from q2api.testing.simulated_upstream import SIM_CLIENT_SECRET, SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread

MODEL = "claude-sonnet-5-5"
CLIENT_KEY = "q2api-test-client-key-5f1e9a7c"
ADMIN_KEY = "q2api-test-admin-key-8c2d4e6f"
REQUEST_ID = re.compile(r"^req_[0-9a-f]{24}$")
# What a raw client sends, like the SDKs: the JSON content type the gateway requires of a body, and its key.
JSON_BODY = {"content-type": "application/json"}
JSON_CLIENT_HEADERS = {"x-api-key": CLIENT_KEY, **JSON_BODY}

# Secrets that must never reach a log line or an error message: the client and admin
# keys, OIDC client secrets and device codes, any refresh or access token the simulator issues, Kiro API keys.
_SECRET_PATTERNS = (
    re.compile(re.escape(CLIENT_KEY)),
    re.compile(re.escape(SIM_CLIENT_SECRET)),
    re.compile(re.escape(ADMIN_KEY)),
    re.compile(r"sim-refresh-\d+"),
    re.compile(r"sim-refresh-device-\d+"),
    re.compile(r"sim-access-\d+"),
    re.compile(r"sim-registered-secret-\d+"),
    re.compile(r"sim-device-\d+"),
    re.compile(r"ksk_[A-Za-z0-9_-]+"),  # Kiro API keys
)


def gateway_settings(
    sim: SimulatedUpstream | SimulationThread, data_dir: Path, *, auth_method: str = "idc", **env: str
) -> Settings:
    """Settings for a gateway on `sim` with one environment account and CLIENT_KEY as the client key."""
    values = {**sim.env(auth_method), "Q2API_DATA_DIR": str(data_dir), "Q2API_API_KEYS": CLIENT_KEY, **env}
    return load_settings(values, env_file=None)


@contextlib.asynccontextmanager
async def gateway(
    sim: SimulatedUpstream, data_dir: Path, *, auth_method: str = "idc", **env: str
) -> AsyncIterator[str]:
    """The real gateway on a free loopback port; yields its base URL."""
    async with running_gateway(gateway_settings(sim, data_dir, auth_method=auth_method, **env)) as url:
        yield url


def sdk(url: str, *, max_retries: int = 0, api_key: str = CLIENT_KEY) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=url, api_key=api_key, max_retries=max_retries)


async def ask(client: anthropic.AsyncAnthropic, text: str = "hi", *, stream: bool = False) -> str:
    """One Messages call; the reply's text (a streamed reply is read to the end)."""
    messages = [{"role": "user", "content": text}]
    if not stream:
        message = await client.messages.create(model=MODEL, max_tokens=100, messages=messages)
        return "".join(block.text for block in message.content if block.type == "text")
    response = await client.messages.create(model=MODEL, max_tokens=100, messages=messages, stream=True)
    pieces = []
    async for event in response:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            pieces.append(event.delta.text)
    return "".join(pieces)


async def eventually(
    send: Callable[[], Awaitable[httpx2.Response]], status: int, within: float = 5.0
) -> httpx2.Response:
    """`send()` again until it is answered `status`, for a change the gateway takes up within seconds
    (a key revoked or created in the store: each worker trusts a looked-up key for two); the first
    answer with that status, or a failure after `within` seconds."""
    deadline = time.monotonic() + within
    while (response := await send()).status_code != status:
        assert time.monotonic() < deadline, f"still {response.status_code} after {within} s: {response.text[:200]}"
        await asyncio.sleep(0.05)
    return response


def with_upstream_request_id(reply: Reply, request_id: str) -> Reply:
    """`reply` sent with a known `x-amzn-requestid`, so a test can look for it in the log."""
    if isinstance(reply, (ErrorReply, StreamReply)):
        return dataclasses.replace(reply, headers={**reply.headers, "x-amzn-requestid": request_id})
    return reply


def assert_error_envelope(body: Any, error_type: str) -> str:
    """Check the Anthropic error envelope; returns the message."""
    assert isinstance(body, dict), body
    assert body["type"] == "error", body
    error = body["error"]
    assert set(error) == {"type", "message"}, body
    assert error["type"] == error_type, body
    assert isinstance(error["message"], str) and error["message"], body
    assert "Traceback" not in error["message"]
    return error["message"]


def find_secrets(text: str) -> list[str]:
    return [match.group(0) for pattern in _SECRET_PATTERNS for match in pattern.finditer(text)]


@dataclasses.dataclass(frozen=True)
class Gateway:
    sim: SimulatedUpstream
    client: anthropic.AsyncAnthropic
    base_url: str
    settings: Settings

    def http(self, **options: Any) -> httpx2.AsyncClient:
        """A raw client that carries the client key and says its bodies are JSON, for looking below the SDK."""
        return httpx2.AsyncClient(base_url=self.base_url, headers=JSON_CLIENT_HEADERS, **{"timeout": 10, **options})

    def upstream_body(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a GenerateAssistantResponse call the simulator received."""
        return self.sim.requests[index].body


@contextlib.asynccontextmanager
async def open_gateway(
    data_dir: Path, *, prepare: Callable[[SimulatedUpstream], None] | None = None, **env: str
) -> AsyncIterator[Gateway]:
    """A simulator, a gateway on it (one env account, CLIENT_KEY required) and an SDK client.

    `prepare` sets the simulator up before the gateway starts (its catalogue, credits, …).
    Extra keyword arguments are environment variables for the gateway's settings.
    """
    async with SimulatedUpstream() as sim:
        if prepare is not None:
            prepare(sim)
        settings = gateway_settings(sim, data_dir, **env)
        async with running_gateway(settings) as base_url:
            client = anthropic.AsyncAnthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=0, timeout=20)
            async with client:
                yield Gateway(sim, client, base_url, settings)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def current_user_message(body: dict[str, Any]) -> dict[str, Any]:
    return body["conversationState"]["currentMessage"]["userInputMessage"]


# -- raw SSE -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RawEvent:
    name: str
    data: str


async def read_sse(response: httpx2.Response) -> AsyncIterator[RawEvent]:
    """The events of an SSE body as they arrive (name and the joined data lines)."""
    name, data = "", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and (name or data):
            yield RawEvent(name, "\n".join(data))
            name, data = "", []


# -- logs ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CapturedLine:
    level: str
    message: str
    extra: dict[str, Any]


class CapturedLogs:
    def __init__(self) -> None:
        self.lines: list[CapturedLine] = []
        self.rendered = io.StringIO()  # everything as a sink would write it, tracebacks included

    def sink(self, message: Any) -> None:
        record = message.record
        self.lines.append(CapturedLine(record["level"].name, record["message"], dict(record["extra"])))
        self.rendered.write(str(message))

    @property
    def text(self) -> str:
        return self.rendered.getvalue()

    def for_request(self, request_id: str) -> list[CapturedLine]:
        return [line for line in self.lines if line.extra.get("request_id") == request_id]

    def eventually_for_request(self, request_id: str, timeout: float = 5.0) -> list[CapturedLine]:
        """`for_request`, once it has a line: a gateway in another thread may write its
        request line just after the client has read the response."""
        deadline = time.monotonic() + timeout
        while not (lines := self.for_request(request_id)) and time.monotonic() < deadline:
            time.sleep(0.01)
        return lines

    def request_lines(self) -> list[CapturedLine]:
        return [line for line in self.lines if line.message.startswith("POST /v1/messages")]


@contextlib.contextmanager
def capture_logs() -> Iterator[CapturedLogs]:
    """Every loguru record at DEBUG and above, message and bound fields both."""
    captured = CapturedLogs()
    # diagnose=False as in production (log_setup): tracebacks without local variables.
    handler = logger.add(
        captured.sink, level="DEBUG", format="{level} {message} {extra}", colorize=False, diagnose=False
    )
    try:
        yield captured
    finally:
        logger.remove(handler)
