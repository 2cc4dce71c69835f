"""Small helpers for the end-to-end error, edge and token tests.

The real gateway on loopback, pointed at the simulated Amazon Q upstream, with
the official `anthropic` SDK as the client. Kept local to these test files on
purpose: they only need a handful of conveniences.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import anthropic
from loguru import logger

from q2api.settings import Settings, load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.scripts import ErrorReply, Reply, StreamReply
from q2api.testing.simulated_upstream import SIM_CLIENT_SECRET, SimulatedUpstream, SimulationThread

MODEL = "claude-sonnet-5-5"
CLIENT_KEY = "q2api-test-client-key-5f1e9a7c"
REQUEST_ID = re.compile(r"^req_[0-9a-f]{24}$")

# Secrets that must never reach a log line or an error message: the client key,
# the OIDC client secret, and any refresh or access token the simulator issues.
_SECRET_PATTERNS = (
    re.compile(re.escape(CLIENT_KEY)),
    re.compile(re.escape(SIM_CLIENT_SECRET)),
    re.compile(r"sim-refresh-\d+"),
    re.compile(r"sim-access-\d+"),
)


def gateway_settings(
    sim: SimulatedUpstream | SimulationThread, data_dir: Path, *, auth_method: str = "idc", **env: str
) -> Settings:
    """Settings for a gateway on `sim` with one environment account and CLIENT_KEY as the client key."""
    values = {**sim.env(auth_method), "Q2API_DATA_DIR": str(data_dir), "Q2API_API_KEYS": CLIENT_KEY, **env}
    return load_settings(values, env_file=None)


@contextlib.asynccontextmanager
async def gateway(sim: SimulatedUpstream, data_dir: Path, *, auth_method: str = "idc", **env: str) -> AsyncIterator[str]:
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
class LogRecord:
    level: str
    message: str
    extra: Mapping[str, Any]

    @property
    def text(self) -> str:
        return self.message + "".join(f" {key}={value}" for key, value in self.extra.items())


class LogCapture:
    """Every loguru record emitted while active, message and bound fields both."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []

    def _sink(self, message: Any) -> None:
        record = message.record
        self.records.append(LogRecord(record["level"].name, record["message"], dict(record["extra"])))

    @property
    def text(self) -> str:
        return "\n".join(record.text for record in self.records)

    def for_request(self, request_id: str) -> list[LogRecord]:
        return [record for record in self.records if record.extra.get("request_id") == request_id]


@contextlib.contextmanager
def capture_logs() -> Iterator[LogCapture]:
    capture = LogCapture()
    handler = logger.add(capture._sink, level="DEBUG", format="{message}")
    try:
        yield capture
    finally:
        logger.remove(handler)
