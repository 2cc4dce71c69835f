"""The HTTP edge: request ids, client authentication, bounded body reads, error responses.

Everything a client can get wrong before its request reaches the converter is
answered here, always in the Anthropic error envelope.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable

import orjson
from loguru import logger
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from q2api.anthropic.errors import AnthropicError
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.door import FrontDoor
from q2api.frontdoors.openai_shared import ChatError
from q2api.log_text import one_line
from q2api.openai.errors import OpenAIError
from q2api.server import metrics
from q2api.server.lifecycle.sink import AsgiSink, Sink
from q2api.server.transport import BODY_TIMED_OUT

REQUEST_ID_HEADER = "request-id"
_REQUEST_ID_HEADER_BYTES = REQUEST_ID_HEADER.encode()
# (path, error, request id) → the error response in the envelope of the door that path belongs to.
DoorErrorResponse = Callable[[str, AnthropicError, str | None], Response]
# Polled by monitors and scrapers: their lines are DEBUG, so they do not drown the request lines.
_POLLED_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/api/hello"})
# (`HEAD /api/hello`: Claude Code's connectivity probe at each start, seen from version 2.1.332;
# its 404 is expected and harmless, not a line for every session.)
# Read every few seconds by an open console (its panels refresh themselves), and the console's own
# files: DEBUG too. Changes made there (POST, PATCH, DELETE) stay INFO and have their audit line.
_POLLED_PREFIXES = ("/admin/api/", "/console")
_READS = frozenset({"GET", "HEAD"})


def new_request_id() -> str:
    return "req_" + secrets.token_hex(12)


class RequestIdMiddleware:
    """Gives every HTTP request an id, and every response (404s and 405s included) its `request-id` header.

    The id is also put in the log context for the whole exchange, so lines
    logged deep inside (an upstream refusal with Amazon Q's own request id, a
    retry, a token refresh) can be tied to the client's request. Requests to
    other routes than the front doors' POSTs, whose relay writes a richer line,
    get their one log line (and their request metrics) here (`/healthz`,
    `/readyz` and `/metrics` at DEBUG: monitors poll them; so does the console
    its admin API reads).

    A gateway bug (an exception no handler turned into a response) is answered
    here too: its traceback is logged inside the request's log context, and the
    client gets the 500 envelope with `Connection: close`.

    The front doors' POST routes (`self_logged`) write their request's line and metrics themselves
    (q2api.server.lifecycle.exchange_log): here they get theirs only when a gateway bug is answered here.
    """

    def __init__(
        self,
        app: ASGIApp,
        error_response_for: DoorErrorResponse | None = None,
        self_logged: frozenset[tuple[str, str]] = frozenset(),
        route_label: Callable[[str], str] | None = None,
    ) -> None:
        self.app = app
        # The route a request's metrics are counted under (q2api.server.doors.ROUTE_LABELS; default: "other").
        self._route_label = route_label or _uncounted
        # The bug's 500 in the envelope of the door the request came through (default: Anthropic's).
        self._error_response_for = error_response_for or default_error_response_for
        self._self_logged = self_logged  # (method, path) of the routes that write their own line

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = begin_request(scope)
        started = time.perf_counter()
        status = 500  # if no response starts, the server answers 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status, response_started = message["status"], True
                headers = list(message.get("headers", ()))
                if not any(name.lower() == _REQUEST_ID_HEADER_BYTES for name, _ in headers):
                    headers.append((_REQUEST_ID_HEADER_BYTES, request_id.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        method, path = scope["method"], scope["path"]
        answered_here = False
        with logger.contextualize(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception as exc:
                if response_started:
                    # uvicorn closes a connection whose response was left unfinished.
                    log_gateway_bug(exc, method, path)
                    return
                status, answered_here = 500, True
                await answer_gateway_bug(exc, scope, receive, send, self._error_response_for, request_id)
            finally:
                if answered_here or (method, path) not in self._self_logged:  # else the route wrote its own
                    level = "DEBUG" if _polled(method, path) else "INFO"
                    logger.bind(status=status).log(level, f"{method} {one_line(path)}")
                    metrics.observe_request(
                        route=self._route_label(path),
                        model=metrics.NO_MODEL,
                        status=status,
                        seconds=time.perf_counter() - started,
                    )


def _uncounted(path: str) -> str:
    return metrics.OTHER_ROUTE


def _polled(method: str, path: str) -> bool:
    return path in _POLLED_PATHS or (method in _READS and path.startswith(_POLLED_PREFIXES))


def begin_request(scope: Scope) -> str:
    """A new request id, kept in the request's state (`request.state.request_id`)."""
    request_id = new_request_id()
    scope.setdefault("state", {})["request_id"] = request_id
    return request_id


def default_error_response_for(path: str, error: AnthropicError, request_id: str | None) -> Response:
    return error_response(error, request_id)


def log_gateway_bug(exc: Exception, method: str, path: str) -> None:
    # Logged inside the request's log context, so the traceback line carries the request id.
    logger.opt(exception=exc).error(f"unhandled error on {method} {one_line(path)}")


async def answer_gateway_bug(
    exc: Exception,
    scope: Scope,
    receive: Receive,
    send: Send,
    error_response_for: DoorErrorResponse,
    request_id: str,
) -> None:
    """Log a gateway bug and answer it, before any response started, with the 500 envelope."""
    log_gateway_bug(exc, scope["method"], scope["path"])
    response = error_response_for(scope["path"], _INTERNAL_ERROR, request_id)
    # After a gateway bug the connection's state is unknown: say so, and the server closes it.
    response.headers["connection"] = "close"
    await response(scope, receive, send)


_INTERNAL_ERROR = AnthropicError(500, "internal gateway error; see the gateway log for details")


class SinkResponse(Response):
    """The shell's adapter of the lifecycle's sink (q2api.server.lifecycle.sink): a response whose
    status, headers and body `fill` writes, streamed onto the ASGI `send` as they come."""

    def __init__(self, fill: Callable[[Sink], Awaitable[None]]) -> None:
        self._fill = fill
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._fill(AsgiSink(send))


def json_response(body: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, headers=headers, media_type="application/json")


# Client errors the same request cannot get past by being sent again: a bad field, a bad or missing
# key, no account, a refused model… Both official SDKs (and Claude Code, which retries a 401 on its
# own) read `x-should-retry: false` before anything else; without it a client may retry for minutes
# in silence. Left out: 408 (the body was slow), 409 and 429 (later may work; a 429 that will not
# says so itself, as a used-up quota does).
RETRYABLE_CLIENT_ERRORS = frozenset({408, 409, 429})


def error_response(error: AnthropicError, request_id: str | None, door: FrontDoor = CLAUDE_DOOR) -> Response:
    """`error` in `door`'s envelope (the Anthropic one by default), with the request's id; a client
    error that retrying cannot fix says so (`x-should-retry: false`)."""
    reply = door.error_reply(error, request_id)
    headers = dict(reply.headers)
    if 400 <= reply.status < 500 and reply.status not in RETRYABLE_CLIENT_ERRORS:
        headers.setdefault("x-should-retry", "false")
    if request_id:
        headers[REQUEST_ID_HEADER] = request_id
    return json_response(reply.envelope, reply.status, headers)


class ClientKeys:
    """The configured client keys; an empty set means the gateway is open."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = [key.encode() for key in keys if key]

    @property
    def required(self) -> bool:
        return bool(self._keys)

    def matches(self, presented: str) -> bool:
        """Whether `presented` is one of the configured keys (compared with each, in constant time)."""
        candidate = presented.encode()
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(candidate, key)
        return matched


KEY_REQUIRED = "x-api-key header or Authorization: Bearer is required"
KEY_INVALID = "invalid x-api-key"
KEY_INVALID_BEARER = "invalid Authorization: Bearer key"  # the OpenAI SDKs' (and Anthropic SDK 2.x's) way


def key_refusal(request: HTTPConnection) -> str:
    """The 401's message for a request whose key is not accepted: it names what the client sent."""
    if request.headers.get("x-api-key"):
        return KEY_INVALID
    return KEY_REQUIRED if presented_key(request) is None else KEY_INVALID_BEARER


def store_unavailable(message: str, *, retry_after: int | None = None) -> ChatError:
    """The 503 for a store (client keys, stored responses) that cannot be read: `overloaded_error` on
    the Claude door, `code: "store_unavailable"` on the OpenAI doors (docs/errors.md)."""
    headers = {"retry-after": str(retry_after)} if retry_after is not None else None
    return ChatError(
        OpenAIError(503, message, code="store_unavailable", headers=headers), error_type="overloaded_error"
    )


def presented_key(request: HTTPConnection) -> str | None:
    """The client key a request carries: `x-api-key` (SDK 0.x/1.x), else `Authorization: Bearer` (SDK 2.x,
    Claude Code with ANTHROPIC_AUTH_TOKEN); None: neither. q2api.server.lifecycle.tenancy judges it."""
    # An empty x-api-key next to a Bearer token (some clients send both) defers to the Bearer token.
    presented = request.headers.get("x-api-key") or None
    if presented is None:
        authorization = request.headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        presented = token.strip() if scheme.lower() == "bearer" else None
    return presented or None


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) anything over `limit` bytes without buffering it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        if request.scope.get("state", {}).get(BODY_TIMED_OUT):
            raise AnthropicError(408, "the request body did not arrive in time", error_type="timeout_error") from None
        raise AnthropicError(400, "the client closed the connection while sending the body") from None
    return b"".join(chunks)


def _too_large(limit: int) -> AnthropicError:
    return AnthropicError(413, f"request body exceeds the gateway limit of {limit} bytes")
