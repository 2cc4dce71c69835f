"""The fault matrix: every upstream and token-service fault × JSON / stream → what the client sees.

One table, one row per fault the simulator can play, with the outcome a client
must see for a non-streaming and for a streaming request:

* `Status(code, type)`: a real HTTP error status and envelope (the fault came
  before the first byte; for streams, within the hold before any content);
* `StreamError(type)`: a 200 stream that starts properly and ends with an
  `error` event of that type, never `message_stop`;
* `Complete(stop_reason)`: the full reply (the gateway recovered by itself).

The last column is the client leaving, at each stage a request can be in: the
upstream request must be closed and the request logged as 499 `client_disconnected`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx2
import pytest

from q2api.testing import scripts
from q2api.testing.gateway_server import GatewayThread
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread
from tests.support.gateway_harness import (
    CLIENT_KEY,
    MODEL,
    assert_error_envelope,
    capture_logs,
    gateway_settings,
    open_gateway,
)


@dataclasses.dataclass(frozen=True)
class Status:
    code: int
    error_type: str


@dataclasses.dataclass(frozen=True)
class StreamError:
    error_type: str


@dataclasses.dataclass(frozen=True)
class Complete:
    stop_reason: str = "end_turn"


Outcome = Status | StreamError | Complete


@dataclasses.dataclass(frozen=True)
class Fault:
    replies: tuple[scripts.Reply, ...]  # what the simulator answers, in order (then it echoes)
    json: Outcome
    stream: Outcome
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)  # the gateway's settings over MATRIX_ENV


# The timeout faults stall ten seconds, twenty times the timeout they test (the simulator's handler
# ends as soon as the gateway hangs up): the gateway's timer fires first on any machine.
SHORT_TIMEOUT = "0.5"
STALL = 10.0


PARTIAL = "Partial answer"
UPSTREAM_FAULTS: dict[str, Fault] = {
    # HTTP errors before the reply starts.
    "context overflow": Fault(
        (scripts.context_overflow(),), Status(400, "invalid_request_error"), Status(400, "invalid_request_error")
    ),
    "improperly formed": Fault(
        (scripts.improperly_formed(),), Status(400, "invalid_request_error"), Status(400, "invalid_request_error")
    ),
    "monthly quota": Fault(
        (scripts.monthly_quota(),), Status(429, "rate_limit_error"), Status(429, "rate_limit_error")
    ),
    "throttled": Fault((scripts.throttled(),), Status(429, "rate_limit_error"), Status(429, "rate_limit_error")),
    "throttled, long hint": Fault(
        (scripts.throttled(retry_after=30),), Status(429, "rate_limit_error"), Status(429, "rate_limit_error")
    ),
    "model overloaded": Fault(
        (scripts.model_overloaded(),), Status(529, "overloaded_error"), Status(529, "overloaded_error")
    ),
    "service unavailable": Fault(
        (scripts.service_unavailable(),), Status(529, "overloaded_error"), Status(529, "overloaded_error")
    ),
    "suspended": Fault((scripts.access_denied(),), Status(403, "permission_error"), Status(403, "permission_error")),
    "server error 500": Fault((scripts.server_error(500),), Status(500, "api_error"), Status(500, "api_error")),
    "server error 503": Fault((scripts.server_error(503),), Status(500, "api_error"), Status(500, "api_error")),
    "connection dropped": Fault((scripts.hangup(),), Status(502, "api_error"), Status(502, "api_error")),
    "headers too slow": Fault(
        (scripts.slow_headers(STALL),),
        Status(504, "timeout_error"),
        Status(504, "timeout_error"),
        env={"Q2API_FIRST_BYTE_TIMEOUT": SHORT_TIMEOUT},
    ),
    # The access token is refused once: the gateway refreshes it and tries again by itself.
    "access token rejected once": Fault((scripts.bearer_invalid(),), Complete(), Complete()),
    "access token rejected twice": Fault(
        (scripts.bearer_invalid(), scripts.bearer_invalid()),
        Status(401, "authentication_error"),
        Status(401, "authentication_error"),
    ),
    # Failures inside the reply, before any content: still a real status for streams (the hold).
    # The stream's modelled error: the model failed mid-reply, which the SDKs retry as overload.
    "exception before content": Fault(
        (scripts.stream(scripts.conversation_event(), scripts.exception_frame("Encountered an unexpected error")),),
        Status(529, "overloaded_error"),
        Status(529, "overloaded_error"),
    ),
    "throttling exception frame before content": Fault(
        (scripts.stream(scripts.exception_frame("Rate exceeded", exception_type="ThrottlingException")),),
        Status(429, "rate_limit_error"),
        Status(429, "rate_limit_error"),
    ),
    # Failures after content: an error event for streams, the fault's own status for JSON
    # (nothing was sent yet: a body broken mid-reply is a 502, Amazon Q's reply broke).
    "exception after content": Fault(
        (scripts.mid_stream_exception(text_before=PARTIAL),),
        Status(529, "overloaded_error"),
        StreamError("overloaded_error"),
    ),
    "truncated frame": Fault((scripts.truncated_reply(PARTIAL),), Status(502, "api_error"), StreamError("api_error")),
    "connection dropped mid-body": Fault(
        (scripts.dropped_reply(PARTIAL),), Status(502, "api_error"), StreamError("api_error")
    ),
    "corrupted frame": Fault((scripts.corrupted_reply(PARTIAL),), Status(502, "api_error"), StreamError("api_error")),
    "silent past the read timeout": Fault(
        (scripts.stalled_reply(STALL, text_before=PARTIAL),),
        Status(504, "timeout_error"),
        StreamError("timeout_error"),
        env={"Q2API_READ_TIMEOUT": SHORT_TIMEOUT},
    ),
    # Not faults, for contrast: the same table must see them complete.
    "plain text": Fault((scripts.text_reply("fine"),), Complete(), Complete()),
    "tool call": Fault(
        (scripts.tool_reply("Read", {"file_path": "/tmp/x"}),), Complete("tool_use"), Complete("tool_use")
    ),
}

# Generous timeouts and hold: no row may depend on how fast the machine is at the moment (a control
# row once failed a 0.5 s first-byte timeout on a loaded machine). The timeout rows set their own.
MATRIX_ENV = {
    "Q2API_MAX_RETRIES": "0",  # each fault reaches the client as it is (retries are tested elsewhere)
    "Q2API_FIRST_BYTE_TIMEOUT": "30",
    "Q2API_READ_TIMEOUT": "30",
    "Q2API_PING_INTERVAL": "0.1",
    "Q2API_STREAM_HOLD_SECONDS": "30",
}


def outcome_of(http: httpx2.Client, *, stream: bool) -> Outcome:
    """Send one request and classify what the client saw."""
    body = {"model": MODEL, "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    with http.stream("POST", "/v1/messages", json=body) as response:
        raw = response.read()
    if response.status_code != 200:
        document = json.loads(raw)
        assert_error_envelope(document, document["error"]["type"])
        return Status(response.status_code, document["error"]["type"])
    if not stream:
        return Complete(json.loads(raw)["stop_reason"])
    events = _sse_events(raw.decode())
    names = [name for name, _ in events]
    assert names[0] == "message_start", names
    if names[-1] == "error":
        assert "message_stop" not in names and "message_delta" not in names, names
        return StreamError(events[-1][1]["error"]["type"])
    assert names[-1] == "message_stop", names
    delta = next(data for name, data in events if name == "message_delta")
    return Complete(delta["delta"]["stop_reason"])


def _sse_events(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        name = next((line[6:].strip() for line in lines if line.startswith("event:")), "")
        data = "".join(line[5:].strip() for line in lines if line.startswith("data:"))
        if name and name != "ping":
            events.append((name, json.loads(data)))
    return events


@pytest.fixture(scope="module")
def upstream() -> Iterator[SimulationThread]:
    with SimulatedUpstream.run_in_thread() as handle:
        yield handle


@pytest.fixture
def http(upstream, tmp_path, fault: str) -> Iterator[httpx2.Client]:
    # A gateway per case: a fault that benches the account (a suspension) must not leak into the next.
    settings = gateway_settings(upstream, tmp_path, **{**MATRIX_ENV, **UPSTREAM_FAULTS[fault].env})
    with (
        GatewayThread(settings) as gateway,
        httpx2.Client(base_url=gateway.base_url, headers={"x-api-key": CLIENT_KEY}, timeout=30) as client,
    ):
        yield client


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("fault", list(UPSTREAM_FAULTS))
def test_upstream_fault(upstream, http, fault: str, stream: bool) -> None:
    case = UPSTREAM_FAULTS[fault]
    upstream.enqueue(*case.replies)
    with capture_logs() as logs:
        seen = outcome_of(http, stream=stream)
        deadline = time.monotonic() + 5
        while not logs.request_lines() and time.monotonic() < deadline:
            time.sleep(0.01)  # a stream's line is written as its response ends, just after the client's last byte
    assert seen == (case.stream if stream else case.json)
    assert "Traceback" not in logs.text
    statuses = [line.extra["status"] for line in logs.request_lines()]
    assert statuses == [seen.code if isinstance(seen, Status) else 200]


# -- token-service faults ------------------------------------------------------------


def _refresh_fails_with(failure: str) -> Callable[[SimulatedUpstream], None]:
    def arrange(sim: SimulatedUpstream) -> None:
        sim.refresh_failure = failure

    return arrange


def _refresh_token_retired(sim: SimulatedUpstream) -> None:
    sim.valid_refresh_tokens = set()


TOKEN_FAULTS: dict[str, tuple[Callable[[SimulatedUpstream], None], Outcome]] = {
    "refresh token rejected (invalid_grant)": (_refresh_token_retired, Status(401, "authentication_error")),
    "client registration rejected (invalid_client)": (
        _refresh_fails_with("invalid_client"),
        Status(401, "authentication_error"),
    ),
    "token service failing (5xx)": (_refresh_fails_with("server_error"), Status(503, "api_error")),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("fault", list(TOKEN_FAULTS))
def test_token_service_fault(tmp_path, fault: str, stream: bool) -> None:
    arrange, expected = TOKEN_FAULTS[fault]
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream._loop.call_soon_threadsafe(arrange, upstream.sim)
        settings = gateway_settings(upstream, tmp_path, **MATRIX_ENV)
        with (
            GatewayThread(settings) as gateway,
            httpx2.Client(base_url=gateway.base_url, headers={"x-api-key": CLIENT_KEY}, timeout=30) as client,
        ):
            assert outcome_of(client, stream=stream) == expected
        assert upstream.sim.requests == []  # nothing reached Amazon Q without a token


def test_token_service_unreachable(tmp_path) -> None:
    with SimulatedUpstream.run_in_thread() as upstream:
        env = {**MATRIX_ENV, "AMAZONQ_OIDC_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens on the discard port
        with (
            GatewayThread(gateway_settings(upstream, tmp_path, **env)) as gateway,
            httpx2.Client(base_url=gateway.base_url, headers={"x-api-key": CLIENT_KEY}, timeout=30) as client,
        ):
            assert outcome_of(client, stream=True) == Status(503, "api_error")
            assert outcome_of(client, stream=False) == Status(503, "api_error")


# -- the client leaves ------------------------------------------------------------------

SLOW = scripts.text_reply("slow " * 100, chunks=100, delay=0.05)  # five seconds of reply
DISCONNECT_STAGES: dict[str, tuple[scripts.Reply, bool, bool]] = {
    # stage: (reply, stream, whether the client waits for the first content before leaving)
    "waiting for Amazon Q's headers (json)": (scripts.slow_headers(5.0), False, False),
    "waiting for Amazon Q's headers (stream)": (scripts.slow_headers(5.0), True, False),
    "while the reply is aggregated (json)": (SLOW, False, False),
    "during the hold, before any content (stream)": (
        scripts.stream(scripts.conversation_event(), scripts.Pause(5.0), scripts.text_events("late")),
        True,
        False,
    ),
    "mid-stream, after the first content (stream)": (SLOW, True, True),
}


@pytest.mark.parametrize("stage", list(DISCONNECT_STAGES))
@pytest.mark.slow  # each client waits half a second before it leaves
async def test_client_leaves(tmp_path, stage: str) -> None:
    reply, stream, after_content = DISCONNECT_STAGES[stage]
    async with open_gateway(tmp_path, Q2API_STREAM_HOLD_SECONDS="10", Q2API_FIRST_BYTE_TIMEOUT="30") as gw:
        gw.sim.enqueue(reply)
        body = {"model": MODEL, "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
        with capture_logs() as logs:
            async with gw.http(timeout=0.5 if not after_content else 10) as http:
                try:
                    async with http.stream("POST", "/v1/messages", json=body) as response:
                        async for chunk in response.aiter_bytes():
                            if b"content_block_delta" in chunk:
                                break  # leave after the first content
                except httpx2.ReadTimeout:
                    pass  # left before any response byte
            assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1 and gw.sim.active_streams == 0)
            assert await gw.sim.wait_until(lambda: bool(logs.request_lines()))
        assert gw.sim.streams_completed == 0
        (line,) = logs.request_lines()
        assert line.extra["status"] == 499 and "error=client_disconnected" in line.message
