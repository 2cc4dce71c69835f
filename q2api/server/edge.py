"""The HTTP edge: request ids, client authentication, bounded body reads, error responses.

Everything a client can get wrong before its request reaches the converter is
answered here, always in the Anthropic error envelope.
"""

from __future__ import annotations

import hmac
import secrets
import time

import orjson
from loguru import logger
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from q2api.admin import metrics
from q2api.anthropic.errors import AnthropicError

REQUEST_ID_HEADER = "request-id"
_REQUEST_ID_HEADER_BYTES = REQUEST_ID_HEADER.encode()
# The routes whose handler writes its own, richer log line (q2api.server.exchange_log).
_RELAY_LOGGED = {("POST", "/v1/messages"), ("POST", "/v1/chat/completions")}
# Polled by monitors and scrapers: their lines are DEBUG, so they do not drown the request lines.
_POLLED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def new_request_id() -> str:
    return "req_" + secrets.token_hex(12)


class RequestIdMiddleware:
    """Gives every HTTP request an id, and every response (404s and 405s included) its `request-id` header.

    The id is also put in the log context for the whole exchange, so lines
    logged deep inside (an upstream refusal with Amazon Q's own request id, a
    retry, a token refresh) can be tied to the client's request. Requests to
    other routes than the two front doors, whose relay writes a richer line,
    get their one log line (and their request metrics) here (`/healthz`,
    `/readyz` and `/metrics` at DEBUG: monitors poll them).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_request_id()
        started = time.perf_counter()
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500  # if no response starts, the server answers 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                if not any(name.lower() == _REQUEST_ID_HEADER_BYTES for name, _ in headers):
                    headers.append((_REQUEST_ID_HEADER_BYTES, request_id.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        with logger.contextualize(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                method, path = scope["method"], scope["path"]
                if (method, path) not in _RELAY_LOGGED:
                    level = "DEBUG" if path in _POLLED_PATHS else "INFO"
                    logger.bind(status=status).log(level, f"{method} {path}")
                    metrics.observe_request(
                        route=path, model=metrics.NO_MODEL, status=status, seconds=time.perf_counter() - started
                    )


def json_response(body: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, headers=headers, media_type="application/json")


def error_response(error: AnthropicError, request_id: str | None) -> Response:
    headers = dict(error.headers)
    if request_id:
        # RequestIdMiddleware adds the header to what passes through it; an unhandled
        # error is answered by Starlette's outermost middleware, outside it.
        headers[REQUEST_ID_HEADER] = request_id
    return json_response(error.envelope(request_id), error.status, headers)


class ClientKeys:
    """The configured client keys; an empty set means the gateway is open."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = [key.encode() for key in keys if key]

    @property
    def required(self) -> bool:
        return bool(self._keys)

    def check(self, request: Request) -> None:
        """Raise a 401 unless the request carries a configured key.

        Accepts `x-api-key` (SDK 0.x/1.x) and `Authorization: Bearer` (SDK 2.x,
        Claude Code with ANTHROPIC_AUTH_TOKEN). Every key is compared in
        constant time so timing reveals nothing about a near miss.
        """
        if not self._keys:
            return
        # An empty x-api-key next to a Bearer token (some clients send both) defers to the Bearer token.
        presented = request.headers.get("x-api-key") or None
        if presented is None:
            authorization = request.headers.get("authorization", "")
            scheme, _, token = authorization.partition(" ")
            presented = token.strip() if scheme.lower() == "bearer" else None
        if not presented:
            raise AnthropicError(401, "x-api-key header or Authorization: Bearer is required")
        candidate = presented.encode()
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(candidate, key)
        if not matched:
            raise AnthropicError(401, "invalid x-api-key")


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
        raise AnthropicError(400, "the client closed the connection while sending the body") from None
    return b"".join(chunks)


def _too_large(limit: int) -> AnthropicError:
    return AnthropicError(413, f"request body exceeds the gateway limit of {limit} bytes")
