"""The gateway's app with the operator's surfaces mounted: the admin API and the web console.

Both exist only when `Q2API_ADMIN_KEY` is set; without it their paths answer 404 like any
unknown path — `/console` with a page saying how to turn it on (and nothing else). `q2api serve`
and the test gateway build the app here, so that the server never imports the admin room (the
admin room depends on the server it operates).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from q2api.admin.console_routes import console_off_route
from q2api.server.app import create_app
from q2api.settings import Settings


class AdminSurface:
    """The admin API and console routes, and what they leave running in the background: device-code
    logins, and verified accounts waiting for the store."""

    def __init__(self, admin_key: str) -> None:
        # Imported here: a gateway without Q2API_ADMIN_KEY never loads the admin API, its device-code
        # logins nor their onboarding (BENCHMARKS.md, issue 33: what a configuration does not use).
        from q2api.accounts.onboarding import BackgroundWrites
        from q2api.admin.console_routes import console_routes
        from q2api.admin.logins import LoginRunner
        from q2api.admin.routes import admin_routes

        self._logins = LoginRunner()
        self._writes = BackgroundWrites()
        self._routes: list[BaseRoute] = [*admin_routes(admin_key, self._logins, self._writes), *console_routes()]

    def routes(self) -> Sequence[BaseRoute]:
        return self._routes

    async def close(self) -> None:
        await self._logins.close()
        await self._writes.close()


class ConsoleOffSurface:
    """Without `Q2API_ADMIN_KEY`: `/console` is still a 404, but a page that says how to turn it on."""

    def routes(self) -> Sequence[BaseRoute]:
        return [console_off_route()]

    async def close(self) -> None:
        return None


def create_gateway_app(settings: Settings) -> Starlette:
    """The gateway, with the admin API and console when `Q2API_ADMIN_KEY` is set."""
    surface = AdminSurface(settings.admin_key) if settings.admin_key else ConsoleOffSurface()
    return create_app(settings, surfaces=[surface])
