"""The Starlette application: routes, edge checks, and the lifespan that owns the I/O resources.

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
from starlette.routing import BaseRoute, Match, Route, WebSocketRoute

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.model_list import list_models_page
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.frontdoors.chat.door import CHAT_DOOR, CHAT_ROUTE
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.claude.reading import read_count_tokens
from q2api.frontdoors.door import FrontDoor
from q2api.frontdoors.responses.codex_models import CLIENT_VERSION_PARAM, codex_models
from q2api.frontdoors.responses.door import RESPONSES_DOOR, RESPONSES_ROUTE
from q2api.openai.shapes import model_entry_fields, model_list
from q2api.server import metrics
from q2api.server.cross_site import HostAllowList, require_json
from q2api.server.edge import ClientKeys, RequestIdMiddleware, error_response, json_response, read_body
from q2api.server.gateway import STATE_KEY, Gateway, gateway_of, open_gateway
from q2api.server.readiness import readiness
from q2api.server.responses_routes import ResponsesRoutes
from q2api.server.responses_websocket import ResponsesSocket
from q2api.server.tenancy import Caller, Tenancy
from q2api.server.transport import transport_limits
from q2api.settings import Settings
from q2api.store.errors import STORE_ERRORS

CHAT_PATHS = ("/v1/chat/",)  # where OpenAI clients are: their errors use the OpenAI envelope
RESPONSES_PATHS = (RESPONSES_ROUTE,)
MODELS_OWNER = "amazon-q"  # `owned_by` of each /v1/models entry: who serves it here


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


def _may_see(caller: Caller, model_id: str) -> bool:
    """A store key limited to some models is shown only those."""
    allowed = caller.key.limits.models if caller.key is not None else None
    return allowed is None or model_id in allowed


def _is_route(request: Request, path: str) -> bool:
    scope = {**request.scope, "path": path}
    return any(route.matches(scope)[0] is not Match.NONE for route in request.app.routes)


def _doubled_v1_hint(request: Request) -> str:
    """For a path with `/v1` twice that is a route with it once: what to change in the base URL."""
    meant = _single_v1(request.url.path)
    if meant is None or not _is_route(request, meant):
        return ""
    if meant.startswith((*CHAT_PATHS, *RESPONSES_PATHS)):
        fix = "an OpenAI client's base URL ends in a single /v1 (OPENAI_BASE_URL=http://HOST:PORT/v1)"
    else:
        fix = "a Claude client's base URL has no /v1 (ANTHROPIC_BASE_URL=http://HOST:PORT): the client adds it"
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


def create_app(settings: Settings, *, surfaces: Sequence[Surface] = ()) -> Starlette:
    client_keys = ClientKeys(list(settings.api_keys))
    # Without client keys, only loopback names and the listed ones are answered (DNS rebinding).
    hosts = HostAllowList(settings.allowed_hosts, enforced=not client_keys.required)
    responses = ResponsesRoutes(settings, hosts)

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

    async def relayed(request: Request, door: FrontDoor) -> Response:
        request_id = request.state.request_id  # given by RequestIdMiddleware
        relay = gateway_of(request).relay
        caller = None
        try:
            caller = await admit(request)
            require_json(request)
            body = await read_body(request, settings.max_body_bytes)
        except AnthropicError as error:
            # Refused at the edge, but still one log line, like every other request.
            return relay.refuse(request_id, error, door, caller)
        return await relay.handle(request, body, request_id, door, caller=caller)

    async def messages(request: Request) -> Response:
        return await relayed(request, CLAUDE_DOOR)

    async def chat_completions(request: Request) -> Response:
        return await relayed(request, CHAT_DOOR)

    async def admit(request: Request) -> Caller:
        """The client may use the API: its Host may be answered, and it has a client key if keys are set
        (an environment key, or a store key neither revoked nor expired)."""
        hosts.check(request)
        return await gateway_of(request).tenancy.identify(request)

    async def count_tokens(request: Request) -> Response:
        caller = await admit(request)
        require_json(request)
        body = await read_body(request, settings.max_body_bytes)
        parsed = read_count_tokens(body)
        # A store key may count tokens only for its own models; counting costs no upstream call, so
        # it is held to no rate (Claude Code calls it many times per turn).
        Tenancy.check_model(caller, parsed.model)
        # Without Amazon Q's hidden prompt: Claude Code sums many count_tokens calls per conversation.
        return json_response({"input_tokens": estimate_request_tokens(parsed, include_upstream_prompt=False)})

    async def list_models(request: Request) -> Response:
        caller = await admit(request)
        entries = [entry for entry in gateway_of(request).models.entries() if _may_see(caller, entry["id"])]
        # One list for both SDKs: the Anthropic page, each entry also in the OpenAI shape.
        page = model_list(list_models_page(entries, request.query_params), owned_by=MODELS_OWNER)
        if CLIENT_VERSION_PARAM in request.query_params:  # Codex: its catalogue, every model at once
            page["models"] = codex_models(entries)
        return json_response(page)

    async def retrieve_model(request: Request) -> Response:
        caller = await admit(request)
        model_id = request.path_params["model_id"]
        entry = gateway_of(request).models.entry(model_id)
        if entry is None or not (_may_see(caller, entry["id"]) or _may_see(caller, model_id)):
            raise AnthropicError(
                404,
                f"model {model_id!r} is not served here: GET /v1/models lists the models this gateway serves",
                error_type="not_found_error",
            )
        return json_response({**model_entry_fields(MODELS_OWNER), **entry})

    async def healthz(request: Request) -> Response:
        # Liveness plus each account's health and last known credits (labels only, never a credential).
        gateway = gateway_of(request)
        accounts = [
            {
                "id": view.account_id,
                "label": view.label,
                "health": view.health,
                "resting_seconds": round(view.resting_for),
                "credits": known.as_dict() if (known := gateway.discovery.credits(view.account_id)) else None,
            }
            for view in gateway.pool.health()
        ]
        return json_response({"status": "ok", "accounts": accounts})

    async def metrics_endpoint(request: Request) -> Response:
        # No auth, like /healthz: it holds counts and account labels, never a secret.
        accounts = [
            metrics.AccountState(view.account_id, view.label, view.health) for view in gateway_of(request).pool.health()
        ]
        return Response(metrics.render(accounts), media_type=metrics.CONTENT_TYPE)

    async def readyz(request: Request) -> Response:
        gateway = gateway_of(request)
        reason = await readiness(gateway.store, gateway.pool, gateway.reloader)
        if reason is None:
            note = gateway.pool.resting_note()
            return json_response({"status": "ready", **({"note": note} if note else {})})
        return json_response({"status": "not_ready", "reason": reason}, 503)

    def door_error(path: str, error: AnthropicError, request_id: str | None) -> Response:
        path = _single_v1(path) or path  # a doubled /v1 still reaches its door's clients in their envelope
        door: FrontDoor = CLAUDE_DOOR
        if path.startswith(CHAT_PATHS):
            door = CHAT_DOOR
        elif path.startswith(RESPONSES_PATHS):
            door = RESPONSES_DOOR
        return error_response(error, request_id, door)

    def error_for(request: Request, error: AnthropicError) -> Response:
        # Each door's clients get its own envelope, for routing errors and bugs too.
        return door_error(request.url.path, error, getattr(request.state, "request_id", None))

    async def anthropic_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AnthropicError)
        return error_for(request, exc)

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
        return error_for(request, error)

    # The front doors' relay writes each request's log line and metrics itself (q2api.server.exchange_log).
    self_logged = frozenset({("POST", "/v1/messages"), ("POST", CHAT_ROUTE), ("POST", RESPONSES_ROUTE)})
    app = Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route(CHAT_ROUTE, chat_completions, methods=["POST"]),
            Route(RESPONSES_ROUTE, responses.create, methods=["POST"]),
            WebSocketRoute(RESPONSES_ROUTE, ResponsesSocket(settings, hosts, responses).serve),
            Route(RESPONSES_ROUTE + "/{response_id}", responses.retrieve, methods=["GET"]),
            Route(RESPONSES_ROUTE + "/{response_id}", responses.delete, methods=["DELETE"]),
            Route(RESPONSES_ROUTE + "/{response_id}/input_items", responses.input_items, methods=["GET"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{model_id}", retrieve_model, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            *(route for surface in surfaces for route in surface.routes()),
        ],
        middleware=[Middleware(RequestIdMiddleware, error_response_for=door_error, self_logged=self_logged)],
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
    return app
