"""The real gateway on loopback, the simulated Amazon Q upstream, and the official SDK as client.

    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gw:
        gw.sim.enqueue(scripts.text_reply("Hello"))
        message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("hi")])

Also: a raw HTTP client for what the SDK hides (pings, statuses of a held stream),
an SSE reader, a loguru capture, and the secrets a log must never contain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from loguru import logger

from q2api.settings import Settings, load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SIM_CLIENT_SECRET, SIM_REFRESH_TOKEN, SimulatedUpstream

MODEL = "claude-sonnet-5-5"
CLIENT_KEY = "q2api-e2e-client-key-3b9f07d1"


@dataclasses.dataclass(frozen=True)
class Gateway:
    sim: SimulatedUpstream
    client: anthropic.AsyncAnthropic
    base_url: str
    settings: Settings

    def http(self, **options: Any) -> httpx2.AsyncClient:
        """A raw client that carries the client key, for looking below the SDK."""
        return httpx2.AsyncClient(base_url=self.base_url, headers={"x-api-key": CLIENT_KEY}, **{"timeout": 10, **options})

    def upstream_body(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a GenerateAssistantResponse call the simulator received."""
        return self.sim.requests[index].body


@contextlib.asynccontextmanager
async def open_gateway(data_dir: Path, **env: str) -> AsyncIterator[Gateway]:
    """A simulator, a gateway on it (one env account, CLIENT_KEY required) and an SDK client.

    Extra keyword arguments are environment variables for the gateway's settings.
    """
    async with SimulatedUpstream() as sim:
        values = {**sim.env(), "Q2API_DATA_DIR": str(data_dir), "Q2API_API_KEYS": CLIENT_KEY, **env}
        settings = load_settings(values, env_file=None)
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


def secrets_of(sim: SimulatedUpstream) -> list[str]:
    """The credentials in play: the client key, the refresh token, the client secret, live access tokens."""
    return [CLIENT_KEY, SIM_REFRESH_TOKEN, SIM_CLIENT_SECRET, *sim.valid_access_tokens]


# Every access token the simulator ever issued, revoked ones included.
ACCESS_TOKEN_SHAPE = re.compile(r"sim-access-\d+")
