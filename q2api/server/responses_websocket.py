"""The Responses API over a WebSocket: `GET /v1/responses` upgraded, as Codex's `openai` provider uses it.

One connection carries a conversation's turns (OpenAI's "WebSocket mode", Codex's
`responses_websockets=2026-02-06`). The client sends one JSON message per turn and gets back the
very events of the SSE stream, one per message:

    → {"type": "response.create", "model": …, "input": […], "previous_response_id": …, …}
    ← {"type": "response.created", …} … {"type": "response.completed", …}

Each `response.create` is the body of a `POST /v1/responses` (`stream` is implied) and runs the
same way: the client key checked again (a key revoked meanwhile stops the next turn), its
store-key limits and usage ledger row, the relay with its log line (`POST /v1/responses`),
`previous_response_id` and the stored responses. Two things are the socket's own:

* `previous_response_id` may name the connection's last response even when it was not stored
  (`store: false`, what Codex sends): the connection keeps that one conversation in memory, as
  OpenAI's does, so Codex sends only the new items of each turn;
* `generate: false` prepares a turn without calling Amazon Q (Codex's "prewarm"): the request is
  read and checked, and answered with an empty completed response the next turn continues.

Messages are answered one at a time, in order. An error is an `error` message in OpenAI's
WebSocket form, `{"type": "error", "status": 400, "error": {…}, "headers": {…}}`, which Codex
reads as the HTTP status it stands for; the connection stays open. A client that closes the
connection stops its turn at once: the relay hears a disconnect, as over HTTP, and closes the
Amazon Q stream.

The handshake is admitted as an HTTP request is (Host, client key); a refusal is an HTTP answer
in the OpenAI envelope, before any upgrade (Codex shows its message, and falls back to HTTP for
a 426 only). A browser page could open a WebSocket to a gateway on loopback, so a gateway
without client keys refuses a handshake that carries an `Origin` header (browsers always send
one; Codex and the SDKs never do).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
from loguru import logger
from starlette.requests import Request
from starlette.types import Message, Scope
from starlette.websockets import WebSocket

from q2api.anthropic.errors import AnthropicError
from q2api.frontdoors.door import DoorCall
from q2api.frontdoors.openai_shared import ChatError
from q2api.frontdoors.responses.door import (
    RESPONSES_ROUTE,
    ResponsesCall,
    ResponsesDoor,
    responses_error_reply,
)
from q2api.frontdoors.responses.framing import json_lines
from q2api.frontdoors.responses.message_events import claude_events_of
from q2api.frontdoors.responses.reply import ResponseBuilder
from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.server.admission import hosts_of
from q2api.server.cross_site import HostAllowList, refuse_browser_websocket
from q2api.server.edge import REQUEST_ID_HEADER, log_gateway_bug, new_request_id
from q2api.server.gateway import Gateway, gateway_of
from q2api.server.lifecycle.sink import write_whole
from q2api.server.lifecycle.tenancy import Caller, Tenancy
from q2api.server.responses_routes import Turn
from q2api.settings import Settings
from q2api.stored_responses.store import Conversation

if TYPE_CHECKING:
    from q2api.server.doors import Door

CREATE = "response.create"
# Codex tells the server it has handled a response (some versions): there is nothing to do for it.
PROCESSED = "response.processed"
# Messages waiting while a turn runs. Codex sends one at a time; a client that floods the socket
# is told so, message by message, instead of growing the queue without end.
MAX_WAITING = 8
# The headers of a refused turn its error message repeats (Codex reads `retry-after` there).
_ERROR_HEADERS = ("retry-after", "x-should-retry", REQUEST_ID_HEADER)
_INTERNAL = AnthropicError(500, "internal error in the gateway; the connection is closed", error_type="api_error")


@dataclass(slots=True)
class _Connection:
    """One socket: the client's messages waiting, whether it left, and the last response its turns continue."""

    websocket: WebSocket
    gateway: Gateway
    waiting: asyncio.Queue[str | bytes] = field(default_factory=lambda: asyncio.Queue(MAX_WAITING))
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    last: dict[str, Conversation] = field(default_factory=dict)  # the last response's id → its conversation

    async def disconnected(self) -> Message:
        """The `receive` of each turn's request: the client leaving is its disconnect."""
        await self.closed.wait()
        return {"type": "http.disconnect"}

    async def send(self, event: bytes | dict[str, Any]) -> None:
        """One message to the client; nothing once it has left (nobody would read it)."""
        if self.closed.is_set():
            return
        text = (event if isinstance(event, bytes) else orjson.dumps(event)).decode()
        with contextlib.suppress(Exception):  # it left meanwhile: the reader says so
            await self.websocket.send_text(text)

    def remember(self, door: ResponsesDoor, call: DoorCall, answer: object) -> None:
        """The response `door` answered (`call`, finished as `answer`) is the one the next turn may
        continue, stored or not."""
        assert isinstance(call, ResponsesCall) and isinstance(answer, dict)
        items = [*door.history, *call.translated.items, *answer["output"]]
        self.last = {answer["id"]: Conversation(items, answer["model"], root_id=call.chain_root)}


class ResponsesSocket:
    """The WebSocket endpoint of `/v1/responses`: each turn's conversation loaded and stored by the
    door's own `before` / `after` hooks, as over HTTP."""

    def __init__(self, settings: Settings, hosts: HostAllowList, door: Door) -> None:
        self._settings = settings
        self._hosts = hosts
        self._door = door

    async def serve(self, websocket: WebSocket) -> None:
        connection = await self._admit(websocket)
        if connection is None:
            return
        reader = asyncio.ensure_future(self._read(connection))
        try:
            while (message := await self._next(connection)) is not None:
                if not await self._answer(connection, message):
                    with contextlib.suppress(Exception):  # the client may be gone already
                        await websocket.close(1011)
                    return
        finally:
            connection.closed.set()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    # ------------------------------------------------------------ the handshake

    async def _admit(self, websocket: WebSocket) -> _Connection | None:
        """The connection, once its Host and client key are admitted; else the refusal, answered in HTTP."""
        if (await websocket.receive())["type"] != "websocket.connect":
            return None  # gone before the handshake was answered
        gateway = gateway_of(websocket)
        request_id = new_request_id()
        caller: Caller | None = None
        try:
            self._hosts.check(websocket)
            caller = await gateway.tenancy.identify(websocket)
            if caller.presented is None:  # an open gateway: a browser page must not get in
                refuse_browser_websocket(websocket.headers)
        except AnthropicError as error:
            with logger.contextualize(request_id=request_id):
                refusal = gateway.relay.refuse(request_id, error, self._door.front, caller)
            if "websocket.http.response" in websocket.scope.get("extensions", {}):
                await websocket.send_denial_response(refusal)
            else:
                await websocket.close(1008)  # the server answers the handshake 403
            return None
        await websocket.accept()
        return _Connection(websocket, gateway)

    # ------------------------------------------------------------ reading

    async def _read(self, connection: _Connection) -> None:
        """Put the client's messages in the queue until it leaves; then `closed` is set."""
        try:
            while True:
                message = await connection.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("text")
                try:
                    connection.waiting.put_nowait(data if data is not None else message.get("bytes") or b"")
                except asyncio.QueueFull:
                    busy = OpenAIError(
                        429,
                        f"{MAX_WAITING} messages are already waiting for their turn: send the next one once a "
                        "response is answered",
                        code="rate_limit_exceeded",
                    )
                    await connection.send(_error_event(ChatError(busy)))
        except Exception:  # the connection broke: the client is gone all the same
            return
        finally:
            connection.closed.set()

    @staticmethod
    async def _next(connection: _Connection) -> str | bytes | None:
        """The next message, or None once the client left (what still waited has nobody to answer)."""
        got = asyncio.ensure_future(connection.waiting.get())
        left = asyncio.ensure_future(connection.closed.wait())
        try:
            await asyncio.wait((got, left), return_when=asyncio.FIRST_COMPLETED)
        finally:
            got.cancel()
            left.cancel()
        if connection.closed.is_set() or got.cancelled():
            return None
        return got.result()

    # ------------------------------------------------------------ one message

    async def _answer(self, connection: _Connection, data: str | bytes) -> bool:
        """Answer one message; False after a gateway bug (the connection's state is then unknown)."""
        request_id = new_request_id()
        # The turn's log lines (its `POST /v1/responses` line too) say it came over the socket.
        with logger.contextualize(request_id=request_id, transport="websocket"):
            try:
                await self._turn(connection, data, request_id)
            except Exception as exc:
                log_gateway_bug(exc, "WEBSOCKET", RESPONSES_ROUTE)
                await connection.send(_error_event(_INTERNAL))
                return False
        return True

    async def _turn(self, connection: _Connection, data: str | bytes, request_id: str) -> None:
        gateway = connection.gateway
        request = Request(_turn_scope(connection.websocket.scope, request_id), connection.disconnected)
        caller: Caller | None = None
        stream_id: str | None = None
        try:
            caller = await gateway.tenancy.identify(request)  # again: a key revoked meanwhile stops here
            fields = _message_fields(data)
            kind = fields.pop("type")
            if kind == PROCESSED:
                return
            if kind != CREATE:
                raise ChatError(
                    InvalidChatRequest(
                        "type", f"{kind!r} is not supported: this gateway answers {CREATE!r} messages, one at a time"
                    )
                )
            stream_id = _optional(fields, "stream_id", str)
            generate = _optional(fields, "generate", bool) is not False
            fields["stream"] = True  # implied over the socket
            body = orjson.dumps(fields)
            if len(body) > self._settings.max_body_bytes:
                raise AnthropicError(
                    413,
                    f"the response.create message exceeds the gateway limit of {self._settings.max_body_bytes} bytes",
                )
            turn = Turn(json_lines({"stream_id": stream_id} if stream_id else None), connection.last, generate)
            assert self._door.before is not None and self._door.after is not None  # a door with state
            door = await self._door.before(request, caller, body, turn)
            assert isinstance(door, ResponsesDoor)
            stored = partial(self._door.after, request, caller)
            if not generate:
                await self._warm_up(connection, door, body, caller, stored)
                return
        except AnthropicError as error:
            refusal = gateway.relay.refuse(request_id, error, self._door.front, caller)
            await write_whole(_SocketSink(connection, stream_id), refusal)
            return
        finished: list[tuple[DoorCall, object]] = []

        async def after(call: DoorCall, answer: object) -> None:
            await stored(call, answer)
            finished.append((call, answer))

        await gateway.relay.handle(
            body,
            request_id,
            door,
            disconnected=request.receive,
            sink=_SocketSink(connection, stream_id),
            headers=request.headers.items(),
            after=after,
            caller=caller,
        )
        for call, response in finished:
            connection.remember(door, call, response)

    async def _warm_up(
        self,
        connection: _Connection,
        door: ResponsesDoor,
        body: bytes,
        caller: Caller,
        stored: Callable[[DoorCall, object], Awaitable[None]],
    ) -> None:
        """`generate: false`: read and check the turn, call no model, and answer an empty completed
        response for the next turn to continue (stored like any other, unless `store: false`)."""
        gateway = connection.gateway
        call = door.read(body)
        Tenancy.check_model(caller, call.request.model)
        gateway.models.resolve(call.request.model)  # a model the gateway cannot serve is refused now
        builder = ResponseBuilder(call.frame, call.translated.options, report=lambda problem: None)
        nothing = {
            "id": call.frame.response_id,
            "type": "message",
            "role": "assistant",
            "model": call.request.model,
            "content": [],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        for line in call.framing.frame(builder.add_all(claude_events_of(nothing))).splitlines():
            await connection.send(line)
        final = builder.final
        assert final is not None  # the played message always ends
        await stored(call, final)
        connection.remember(door, call, final)
        logger.debug("responses websocket: a turn prepared without generating (generate: false)")


def _turn_scope(socket: Scope, request_id: str) -> Scope:
    """The HTTP request a turn is to the relay: the handshake's headers, a JSON body, its own id."""
    return {
        **socket,
        "type": "http",
        "method": "POST",
        "http_version": "1.1",
        "scheme": "https" if socket.get("scheme") == "wss" else "http",
        "headers": [*socket["headers"], (b"content-type", b"application/json")],
        "state": {**socket.get("state", {}), "request_id": request_id},
    }


def _message_fields(data: str | bytes) -> dict[str, Any]:
    try:
        fields = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ChatError(InvalidChatRequest(None, f"the message is not valid JSON: {exc}")) from None
    if not isinstance(fields, dict):
        raise ChatError(InvalidChatRequest(None, "the message must be a JSON object with a `type`"))
    if not isinstance(fields.get("type"), str):
        raise ChatError(InvalidChatRequest("type", "Field required: the kind of message (response.create)"))
    return fields


def _optional(fields: dict[str, Any], name: str, kind: type) -> Any:
    """Take the socket's own field `name` out of the body; a value of another type is refused by name."""
    value = fields.pop(name, None)
    if value is not None and not isinstance(value, kind):
        raise ChatError(InvalidChatRequest(name, f"must be a {'boolean' if kind is bool else 'string'}"))
    return value


def _error_event(error: AnthropicError) -> dict[str, Any]:
    """An error the socket itself answers (no turn of the relay's): in OpenAI's WebSocket form."""
    reply = responses_error_reply(error)
    return _error_message(reply.status, reply.envelope, dict(reply.headers), None)


def _error_message(status: int, envelope: Any, headers: dict[str, str], stream_id: str | None) -> dict[str, Any]:
    """An error as OpenAI's WebSocket mode sends it: the HTTP status it stands for, and the headers
    a client acts on (Codex reads `status` and `headers`, the SDK `error`)."""
    event: dict[str, Any] = {"type": "error", "status": status, "error": envelope.get("error", envelope)}
    kept = {name: value for name, value in headers.items() if name.lower() in _ERROR_HEADERS}
    if kept:
        event["headers"] = kept
    if stream_id:
        event["stream_id"] = stream_id
    return event


class _SocketSink:
    """A turn's sink (q2api.server.lifecycle.sink): a stream's lines as messages, an error status as
    an error message (a client that left gets nothing)."""

    def __init__(self, connection: _Connection, stream_id: str | None) -> None:
        self._connection = connection
        self._stream_id = stream_id
        self._status = 0
        self._headers: dict[str, str] = {}
        self._pending = b""
        self._body: list[bytes] = []

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._status = status
        self._headers.update((name.decode("latin-1"), value.decode("latin-1")) for name, value in headers)

    async def write(self, chunk: bytes, *, more: bool) -> None:
        connection = self._connection
        if self._status != 200:
            self._body.append(chunk)
            if not more and self._body and not connection.closed.is_set():
                envelope = orjson.loads(b"".join(self._body))
                await connection.send(_error_message(self._status, envelope, self._headers, self._stream_id))
            return
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()  # an unfinished line waits for the rest (the encoder writes whole lines)
        for line in lines:
            if line:
                await connection.send(line)


async def serve(websocket: WebSocket, door: Door) -> None:
    """The WebSocket endpoint of `/v1/responses`, the Responses `door`'s (q2api.server.doors)."""
    await ResponsesSocket(gateway_of(websocket).settings, hosts_of(websocket), door).serve(websocket)
