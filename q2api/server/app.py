"""The Starlette application: routes, edge checks, and the lifespan that owns the I/O resources.

One `aiohttp.ClientSession` and one account pool live for the life of the
process; everything else is built per request from plain data.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from loguru import logger
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from q2api.admin import metrics
from q2api.admin.activity import ActivityLog
from q2api.admin.console_routes import console_routes
from q2api.admin.context import AdminContext
from q2api.admin.logins import LoginRunner
from q2api.admin.routes import admin_routes
from q2api.amazonq.accounts.opening import open_account_store
from q2api.amazonq.accounts.pool import build_account_pool
from q2api.amazonq.accounts.records import Account
from q2api.amazonq.accounts.reload import AccountReloader
from q2api.amazonq.accounts.store_protocol import AccountStore
from q2api.amazonq.catalogue import builtin_catalogue
from q2api.amazonq.upstream import UpstreamClient, create_session
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.model_list import list_models_page
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import parse_count_tokens_request
from q2api.openai.shapes import model_list
from q2api.server.chat_completions import CHAT_DOOR, CHAT_ROUTE
from q2api.server.cross_site import HostAllowList, require_json
from q2api.server.direct_routes import DirectRoutesApp
from q2api.server.edge import ClientKeys, RequestIdMiddleware, json_response, read_body
from q2api.server.front_door import CLAUDE_DOOR, FrontDoor
from q2api.server.model_routing import ModelRouter
from q2api.server.readiness import log_store_contents, readiness
from q2api.server.relay import MessagesRelay
from q2api.server.transport import transport_limits
from q2api.server.wiring import account_discovery, env_account, model_router, refresh_endpoints, upstream_config
from q2api.settings import Settings

CHAT_PATHS = ("/v1/chat/",)  # where OpenAI clients are: their errors use the OpenAI envelope
MODELS_OWNER = "amazon-q"  # `owned_by` of each /v1/models entry: who serves it here


def _slash_hint(request: Request) -> str:
    """For a path that only a trailing slash keeps from being a route: where the client meant to go."""
    path = request.url.path
    meant = path.rstrip("/")
    if meant == path or not any(getattr(route, "path", None) == meant for route in request.app.routes):
        return ""
    return f" (no trailing slash: {meant})"


def create_app(settings: Settings) -> Starlette:
    client_keys = ClientKeys(list(settings.api_keys))
    # Without client keys, only loopback names and the listed ones are answered (DNS rebinding).
    hosts = HostAllowList(settings.allowed_hosts, enforced=not client_keys.required)
    state: dict[str, Any] = {"models": model_router(settings, builtin_catalogue)}
    login_runner = LoginRunner()
    activity = ActivityLog()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not client_keys.required:
            logger.warning("Q2API_API_KEYS is empty: the gateway accepts requests without a client key")
        session = create_session()
        reloader: AccountReloader | None = None
        store: AccountStore | None = None
        try:
            store = await open_account_store(settings.database_url, settings.data_dir, settings.secret_key)
            endpoints = refresh_endpoints(settings)
            pool = await build_account_pool(
                store,
                session,
                endpoints=endpoints,
                seed=env_account(settings),
                failure_limit=settings.account_max_failures,
                observer=metrics.UPSTREAM_OBSERVER,
            )
            await log_store_contents(store)
            reloader = AccountReloader(store, pool)
            reloader.start()
            upstream = UpstreamClient(session, pool, upstream_config(settings), observer=metrics.UPSTREAM_OBSERVER)
            # Each account's catalogue and credits; the admin API reads them through app.state.discovery.
            discovery = app.state.discovery = account_discovery(
                settings, pool, session, observer=metrics.UPSTREAM_OBSERVER
            )
            models = state["models"] = model_router(settings, discovery.catalogue, on_unknown=discovery.request_refresh)

            async def usage(account: Account) -> dict[str, Any] | None:
                try:
                    return await discovery.account_usage(account.id)
                except KeyError:  # not in the pool (disabled): its credits are not read
                    return None

            state["store"] = store
            state["pool"] = pool
            state["discovery"] = discovery
            state["admin"] = AdminContext(
                store, pool, reloader, session, endpoints, usage=usage, activity=activity, models=models.entries
            )
            state["relay"] = MessagesRelay(
                upstream=upstream,
                settings=settings,
                model_aliases=dict(settings.model_map),
                models=models,
                on_exchange_logged=activity.record if settings.admin_key else None,
            )
            await discovery.start()
            logger.info(f"q2api ready: {len(pool)} Amazon Q account(s) serving, endpoint {settings.endpoint}")
            try:
                yield
            finally:
                await discovery.stop()
        finally:
            await login_runner.close()
            if reloader is not None:
                await reloader.stop()
            if store is not None:
                await store.close()
            await session.close()

    async def relayed(request: Request, door: FrontDoor) -> Response:
        request_id = request.state.request_id  # given by DirectRoutesApp
        relay: MessagesRelay = state["relay"]
        try:
            admit(request)
            require_json(request)
            body = await read_body(request, settings.max_body_bytes)
        except AnthropicError as error:
            # Refused at the edge, but still one log line, like every other request.
            return relay.refuse(request_id, error, door)
        return await relay.handle(request, body, request_id, door)

    async def messages(request: Request) -> Response:
        return await relayed(request, CLAUDE_DOOR)

    async def chat_completions(request: Request) -> Response:
        return await relayed(request, CHAT_DOOR)

    def admit(request: Request) -> None:
        """The client may use the API: its Host may be answered, and it has a client key if keys are set."""
        hosts.check(request)
        client_keys.check(request)

    async def count_tokens(request: Request) -> Response:
        admit(request)
        require_json(request)
        body = await read_body(request, settings.max_body_bytes)
        parsed = parse_count_tokens_request(body)
        # Without Amazon Q's hidden prompt: Claude Code sums many count_tokens calls per conversation.
        return json_response({"input_tokens": estimate_request_tokens(parsed, include_upstream_prompt=False)})

    async def list_models(request: Request) -> Response:
        admit(request)
        models: ModelRouter = state["models"]
        # One list for both SDKs: the Anthropic page, each entry also in the OpenAI shape.
        return json_response(
            model_list(list_models_page(models.entries(), request.query_params), owned_by=MODELS_OWNER)
        )

    async def healthz(request: Request) -> Response:
        # Liveness plus each account's health and last known credits (labels only, never a credential).
        discovery = state["discovery"]
        accounts = [
            {
                "id": view.account_id,
                "label": view.label,
                "health": view.health,
                "resting_seconds": round(view.resting_for),
                "credits": known.as_dict() if (known := discovery.credits(view.account_id)) else None,
            }
            for view in state["pool"].health()
        ]
        return json_response({"status": "ok", "accounts": accounts})

    async def metrics_endpoint(request: Request) -> Response:
        # No auth, like /healthz: it holds counts and account labels, never a secret.
        accounts = [metrics.AccountState(view.account_id, view.label, view.health) for view in state["pool"].health()]
        return Response(metrics.render(accounts), media_type=metrics.CONTENT_TYPE)

    async def readyz(request: Request) -> Response:
        reason = await readiness(state["store"], state["pool"])
        if reason is None:
            return json_response({"status": "ready"})
        return json_response({"status": "not_ready", "reason": reason}, 503)

    def door_error(path: str, error: AnthropicError, request_id: str | None) -> Response:
        door = CHAT_DOOR if path.startswith(CHAT_PATHS) else CLAUDE_DOOR
        return door.error_response(error, request_id)

    def error_for(request: Request, error: AnthropicError) -> Response:
        # Each door's clients get its own envelope, for routing errors and bugs too.
        return door_error(request.url.path, error, getattr(request.state, "request_id", None))

    async def anthropic_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AnthropicError)
        return error_for(request, exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            error = AnthropicError(404, f"no such endpoint: {request.method} {request.url.path}{_slash_hint(request)}")
        elif exc.status_code == 405:
            # Keep Starlette's `Allow` header: it tells the client which method would work.
            error = AnthropicError(
                405, f"method {request.method} is not allowed on {request.url.path}", headers=dict(exc.headers or {})
            )
        else:
            error = AnthropicError(exc.status_code, str(exc.detail))
        return error_for(request, error)

    # The front doors, served without Starlette's middleware and router (q2api.server.direct_routes);
    # still routes too, so that their other methods get Starlette's 405.
    front_doors = {("POST", "/v1/messages"): messages, ("POST", CHAT_ROUTE): chat_completions}
    app = DirectRoutesApp(
        direct=front_doors,
        error_response_for=door_error,
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route(CHAT_ROUTE, chat_completions, methods=["POST"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            # Without an admin key the admin routes do not exist: 404, like any unknown path.
            *(admin_routes(settings.admin_key, lambda: state["admin"], login_runner) if settings.admin_key else ()),
            *(console_routes() if settings.admin_key else ()),
        ],
        middleware=[Middleware(RequestIdMiddleware, error_response_for=door_error)],
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
