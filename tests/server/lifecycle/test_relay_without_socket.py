"""The request lifecycle driven without a socket: a body, headers and a disconnect signal in, the
answer (and its one log line) out — no app, no port, no client (q2api.server.lifecycle)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import orjson
import pytest
from starlette.types import Message

from q2api.amazonq.errors import UpstreamHTTPError
from q2api.amazonq.upstream import OpenedReply
from q2api.frontdoors.chat.door import CHAT_DOOR
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.door import FrontDoor
from q2api.models.routing import ModelRouter
from q2api.models.table import builtin_catalogue
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.lifecycle.relay import MessagesRelay
from q2api.settings import Settings

CLAUDE_BODY = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
CHAT_BODY = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}


class _Upstream:
    """An upstream whose replies never open (`hang`) or open with Amazon Q's refusal (`refusal`)."""

    def __init__(self, refusal: Exception | None = None) -> None:
        self.refusal = refusal
        self.opened = 0
        self.cancelled = asyncio.Event()

    def open_stream(self, payload: Any, trace: Any = None) -> OpenedReply:
        self.opened += 1
        return cast(OpenedReply, _Opening(self))


class _Opening:
    def __init__(self, upstream: _Upstream) -> None:
        self._upstream = upstream

    async def __aenter__(self) -> Any:
        if self._upstream.refusal is not None:
            raise self._upstream.refusal
        try:
            await asyncio.Event().wait()  # the upstream never answers
        except asyncio.CancelledError:
            self._upstream.cancelled.set()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        pass

    def close(self) -> None:
        pass


def _relay(upstream: _Upstream, logged: list[Exchange]) -> MessagesRelay:
    catalogue = builtin_catalogue()
    return MessagesRelay(
        upstream=upstream, settings=Settings(), models=ModelRouter(lambda: catalogue), on_exchange_logged=logged.append
    )


async def _stays_connected() -> Message:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _has_left() -> Message:
    return {"type": "http.disconnect"}


async def _handle(relay: MessagesRelay, body: dict[str, Any], door: FrontDoor, disconnected: Any) -> Any:
    return await relay.handle(orjson.dumps(body), "req_test", door, disconnected=disconnected)


@pytest.mark.parametrize(
    ("door", "body", "envelope_of"),
    [
        (CLAUDE_DOOR, {**CLAUDE_BODY, "max_tokens": "many"}, lambda answer: answer["error"]["message"]),
        (CHAT_DOOR, {**CHAT_BODY, "max_tokens": "many"}, lambda answer: answer["error"]["param"]),
    ],
)
async def test_a_body_its_door_refuses_is_answered_in_its_envelope_without_an_upstream_call(
    door: FrontDoor, body: dict[str, Any], envelope_of: Any
) -> None:
    upstream, logged = _Upstream(), []
    response = await _handle(_relay(upstream, logged), body, door, _stays_connected)
    assert response.status_code == 400
    assert "max_tokens" in envelope_of(orjson.loads(response.body))
    assert upstream.opened == 0
    assert [(exchange.status, exchange.route) for exchange in logged] == [(400, door.route)]


async def test_a_client_that_has_left_cancels_the_upstream_call_and_is_logged_499() -> None:
    upstream, logged = _Upstream(), []
    response = await _handle(_relay(upstream, logged), CLAUDE_BODY, CLAUDE_DOOR, _has_left)
    assert response.status_code == 499
    assert upstream.opened == 1
    assert upstream.cancelled.is_set()
    assert [(exchange.status, exchange.error) for exchange in logged] == [(499, "client_disconnected")]


@pytest.mark.parametrize(("door", "status"), [(CLAUDE_DOOR, 429), (CHAT_DOOR, 429)])
async def test_an_upstream_refusal_before_the_first_byte_is_a_real_status_in_the_doors_envelope(
    door: FrontDoor, status: int
) -> None:
    refusal = UpstreamHTTPError(429, "ThrottlingException", "Too many requests")
    upstream, logged = _Upstream(refusal), []
    body = CLAUDE_BODY if door is CLAUDE_DOOR else CHAT_BODY
    response = await _handle(_relay(upstream, logged), body, door, _stays_connected)
    answer = orjson.loads(response.body)
    assert response.status_code == status
    if door is CLAUDE_DOOR:
        assert answer["type"] == "error" and answer["error"]["type"] == "rate_limit_error"
    else:
        assert answer["error"]["code"] == "rate_limit_exceeded"
    assert [exchange.status for exchange in logged] == [status]
