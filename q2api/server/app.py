"""The Starlette application: the doors' routes and the others (q2api.server.doors), error envelopes,
and the lifespan that owns the I/O resources.

The lifespan builds the gateway's long-lived parts (q2api.server.gateway: one HTTP session, the
account store and pool, the relay…) and closes them at shutdown; everything else is built per
request from plain data. The operator's surfaces (admin API, console) are mounted from outside
(`surfaces`, see q2api.admin.app): the server never imports the admin room.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from loguru import logger
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match

from q2api.anthropic.errors import AnthropicError
from q2api.server import doors
from q2api.server.admission import HOSTS_STATE
from q2api.server.cross_site import HostAllowList
from q2api.server.edge import ClientKeys, RequestIdMiddleware, error_response
from q2api.server.gateway import STATE_KEY, Gateway, open_gateway
from q2api.server.lifecycle.tenancy import Tenancy
from q2api.server.transport import transport_limits
from q2api.settings import Settings
from q2api.store.errors import STORE_ERRORS


class Surface(Protocol):
    """Routes served beside the gateway's own (the operator's admin API and console, mounted by
    `q2api.admin`), and what they hold open until shutdown."""

    def routes(self) -> Sequence[BaseRoute]: ...

    async def close(self) -> None:
        """Called at shutdown, before the gateway's own parts close."""
        ...


_REPEATED_V1 = re.compile(r"^(?:/v1){2,}(?=/|$)")


def _single_v1(path: str) -> str | None:
    """`/v1/v1/messages` → `/v1/messages`: the path a client meant whose base URL already ended in
    `/v1` before it added its own; None for a path without `/v1` twice at its start."""
    repeated = _REPEATED_V1.match(path)
    return "/v1" + path[repeated.end() :] if repeated else None


def _is_route(request: Request, path: str) -> bool:
    scope = {**request.scope, "path": path}
    return any(route.matches(scope)[0] is not Match.NONE for route in request.app.routes)


def _doubled_v1_hint(request: Request) -> str:
    """For a path with `/v1` twice that is a route with it once: what to change in the base URL."""
    meant = _single_v1(request.url.path)
    if meant is None or not _is_route(request, meant):
        return ""
    fix = doors.door_of_path(meant).base_url_fix
    return f" (/v1 twice: the client's base URL ends in one /v1 too many; {meant} is the endpoint, and {fix})"


def _slash_hint(request: Request) -> str:
    """For a path that only a trailing slash keeps from being a route: where the client meant to go."""
    path = request.url.path
    meant = path.rstrip("/")
    if meant == path or not any(getattr(route, "path", None) == meant for route in request.app.routes):
        return ""
    return f" (no trailing slash: {meant})"


async def keyless_warning(tenancy: Tenancy) -> str:
    """Start-up's word on client keys when Q2API_API_KEYS is empty: whether the gateway is open
    depends on the keys kept in the store (`q2api keys create`), which then are required."""
    try:
        store_keys = await tenancy.directory.any_usable()
    except STORE_ERRORS as exc:
        return (
            f"Q2API_API_KEYS is empty and the client key store cannot be read ({type(exc).__name__}): "
            "requests get 503 until it can"
        )
    if store_keys:
        return (
            "Q2API_API_KEYS is empty: requests need one of the client keys kept in the store "
            "(`q2api keys list`); one without a key gets 401"
        )
    return (
        "Q2API_API_KEYS is empty and the store holds no client key: the gateway accepts requests without "
        "a client key, until one is set or created (`q2api keys create`)"
    )


def door_error(path: str, error: AnthropicError, request_id: str | None) -> Response:
    path = _single_v1(path) or path  # a doubled /v1 still reaches its door's clients in their envelope
    return error_response(error, request_id, doors.door_of_path(path).front)


def _error_for(request: Request, error: AnthropicError) -> Response:
    # Each door's clients get its own envelope, for routing errors and bugs too.
    return door_error(request.url.path, error, getattr(request.state, "request_id", None))


async def anthropic_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AnthropicError)
    return _error_for(request, exc)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        hint = _doubled_v1_hint(request) or _slash_hint(request)
        error = AnthropicError(404, f"no such endpoint: {request.method} {request.url.path}{hint}")
    elif exc.status_code == 405:
        # Keep Starlette's `Allow` header: it tells the client which method would work.
        error = AnthropicError(
            405, f"method {request.method} is not allowed on {request.url.path}", headers=dict(exc.headers or {})
        )
    else:
        error = AnthropicError(exc.status_code, str(exc.detail))
    return _error_for(request, error)


def create_app(settings: Settings, *, surfaces: Sequence[Surface] = ()) -> Starlette:
    client_keys = ClientKeys(list(settings.api_keys))
    # Without client keys, only loopback names and the listed ones are answered (DNS rebinding).
    hosts = HostAllowList(settings.allowed_hosts, enforced=not client_keys.required)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Gateway]]:
        if settings.debug_message_conversion and logger.level(settings.log_level).no > logger.level("INFO").no:
            # The summary is written at INFO: say so at a level the log shows, rather than nothing at all.
            logger.log(
                max(settings.log_level, "WARNING", key=lambda name: logger.level(name).no),
                f"DEBUG_MESSAGE_CONVERSION=true writes its summary at INFO, which Q2API_LOG_LEVEL={settings.log_level} "
                "hides: set Q2API_LOG_LEVEL=INFO (or lower) to see it",
            )
        async with open_gateway(settings) as gateway:
            if not client_keys.required:
                logger.warning(await keyless_warning(gateway.tenancy))
            try:
                yield {STATE_KEY: gateway}  # in every request's state: `gateway_of(request)`
            finally:
                for surface in surfaces:
                    await surface.close()

    app = Starlette(
        routes=[*doors.routes(), *(route for surface in surfaces for route in surface.routes())],
        middleware=[
            Middleware(
                RequestIdMiddleware,
                error_response_for=door_error,
                self_logged=doors.SELF_LOGGED,
                route_label=doors.ROUTE_LABELS,
            )
        ],
        exception_handlers={
            AnthropicError: anthropic_error,
            HTTPException: http_error,
            # Other exceptions (gateway bugs) are answered by RequestIdMiddleware, inside the request's log context.
        },
        lifespan=lifespan,
    )
    # Starlette would answer `/v1/messages/` with a redirect to an absolute URL built from the
    # request's Host header, which the client chooses: a 404 that names the right path instead.
    app.router.redirect_slashes = False
    app.state.transport_limits = transport_limits(settings)  # read by the server's protocol (transport.py)
    setattr(app.state, HOSTS_STATE, hosts)  # read by the endpoints (q2api.server.admission)
    return app
