"""The admin API's routes, mounted beside the gateway's only when `Q2API_ADMIN_KEY` is set (q2api.admin.app)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from loguru import logger
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from q2api.accounts.onboarding import BackgroundWrites
from q2api.admin import accounts, activity, captures, keys, logins, models, usage
from q2api.admin.auth import AdminKey
from q2api.admin.responses import AdminError
from q2api.server.gateway import Gateway, gateway_of
from q2api.store.errors import STORE_ERRORS

Handler = Callable[[Request, Gateway], Awaitable[Response]]
PREFIX = "/admin/api"


def admin_routes(admin_key: str, runner: logins.LoginRunner, writes: BackgroundWrites | None = None) -> list[Route]:
    """Each handler works on the gateway serving its request (built by the app's lifespan); `runner`
    and `writes` hold what outlives a request (device-code logins, accounts waiting for the store)."""
    key = AdminKey(admin_key)
    writes = BackgroundWrites() if writes is None else writes

    def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            try:
                key.check(request)
                return await handler(request, gateway_of(request))
            except AdminError as error:
                return error.response()
            except STORE_ERRORS as exc:  # the store is down or frozen: say so, in one line and no traceback
                logger.warning(f"admin request {request.method} {request.url.path}: the account store failed: {exc}")
                unavailable = AdminError(
                    503, "store_unavailable", f"the account store is unavailable; try again ({exc})"
                )
                return unavailable.response()
            except Exception as exc:  # the traceback to the log; the operator gets the same envelope as always
                logger.opt(exception=exc).error(f"admin request failed: {request.method} {request.url.path}")
                internal = AdminError(500, "internal_error", "the admin request failed; see the gateway log")
                return internal.response()

        return serve

    async def start_login(request: Request, gateway: Gateway) -> Response:
        return await logins.start_login(request, gateway, runner)

    async def cancel_login(request: Request, gateway: Gateway) -> Response:
        return await logins.cancel_login(request, gateway, runner)

    async def add_account(request: Request, gateway: Gateway) -> Response:
        return await accounts.add_account(request, gateway, writes)

    return [
        Route(f"{PREFIX}/accounts", endpoint(accounts.list_accounts), methods=["GET"]),
        Route(f"{PREFIX}/accounts", endpoint(add_account), methods=["POST"]),
        Route(f"{PREFIX}/accounts/{{account_id}}", endpoint(accounts.patch_account), methods=["PATCH"]),
        Route(f"{PREFIX}/accounts/{{account_id}}", endpoint(accounts.delete_account), methods=["DELETE"]),
        Route(f"{PREFIX}/accounts/{{account_id}}/refresh", endpoint(accounts.refresh_account), methods=["POST"]),
        Route(f"{PREFIX}/accounts/{{account_id}}/usage", endpoint(accounts.account_usage), methods=["GET"]),
        Route(f"{PREFIX}/logins", endpoint(start_login), methods=["POST"]),
        Route(f"{PREFIX}/logins/{{login_id}}", endpoint(logins.login_status), methods=["GET"]),
        Route(f"{PREFIX}/logins/{{login_id}}", endpoint(cancel_login), methods=["DELETE"]),
        Route(f"{PREFIX}/activity", endpoint(activity.list_activity), methods=["GET"]),
        Route(f"{PREFIX}/models", endpoint(models.list_models), methods=["GET"]),
        Route(f"{PREFIX}/keys", endpoint(keys.list_keys), methods=["GET"]),
        Route(f"{PREFIX}/keys", endpoint(keys.create_key), methods=["POST"]),
        Route(f"{PREFIX}/keys/{{key}}", endpoint(keys.show_key), methods=["GET"]),
        Route(f"{PREFIX}/keys/{{key}}", endpoint(keys.patch_key), methods=["PATCH"]),
        Route(f"{PREFIX}/keys/{{key}}", endpoint(keys.revoke_key), methods=["DELETE"]),
        Route(f"{PREFIX}/usage", endpoint(usage.usage_totals), methods=["GET"]),
        Route(f"{PREFIX}/usage/overview", endpoint(usage.usage_page), methods=["GET"]),
        Route(f"{PREFIX}/captures", endpoint(captures.list_captures), methods=["GET"]),
        Route(f"{PREFIX}/captures/{{capture_id}}", endpoint(captures.get_capture), methods=["GET"]),
        Route(f"{PREFIX}/captures/{{capture_id}}", endpoint(captures.delete_capture), methods=["DELETE"]),
    ]
