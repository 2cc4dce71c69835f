"""`GET /console`: the web console, static files shipped in this package, under strict headers.

The page (`console/index.html`) and its modules and style sheet are served as
they are: no build step, nothing fetched from anywhere but this gateway. The
page and each of its files carry a Content-Security-Policy that allows only this
origin's scripts and styles (none inline), forbids framing, and sends no
referrer, so a key typed into the console cannot leak through the page itself.
The console holds the admin key in the tab's session storage and sends it as
`Authorization: Bearer` to `/admin/api/…`; nothing here reads or sets a cookie.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_PATH = "/console"
# The static files, shipped as package data (pyproject `[tool.setuptools.package-data]`).
CONSOLE_DIR = Path(__file__).parent / "console"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    # Revalidate every time (StaticFiles answers 304 when unchanged): an upgraded gateway serves its own console.
    "cache-control": "no-cache",
}


class _WithHeaders:
    """Adds SECURITY_HEADERS to every response of the wrapped ASGI app."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._headers = [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in self._headers}
                kept = [(name, value) for name, value in message.get("headers", []) if name.lower() not in names]
                message = {**message, "headers": kept + self._headers}
            await send(message)

        await self._app(scope, receive, send_with_headers)


# What `/console` answers while the console is off: how to turn it on, and nothing about the gateway.
CONSOLE_OFF_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>q2api console is off</title></head>
<body>
<h1>The q2api console is off</h1>
<p>The web console and the admin API are turned on by an admin key. Set <code>Q2API_ADMIN_KEY</code>
(in the environment or <code>.env</code>; it must differ from every client key), restart
<code>q2api serve</code>, open this page again and sign in with that key.</p>
</body>
</html>
"""


def console_off_route() -> Route:
    """`GET /console` while `Q2API_ADMIN_KEY` is unset: 404, with CONSOLE_OFF_PAGE."""

    async def page(request: Request) -> Response:
        return HTMLResponse(CONSOLE_OFF_PAGE, status_code=404, headers=SECURITY_HEADERS)

    return Route(CONSOLE_PATH, page, methods=["GET"])


def console_routes() -> list[Route | Mount]:
    """`/console` (the page) and `/console/<file>` (its modules and style sheet)."""

    async def page(request: Request) -> Response:
        return FileResponse(CONSOLE_DIR / "index.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    return [
        Route(CONSOLE_PATH, page, methods=["GET"]),
        Mount(CONSOLE_PATH, app=_WithHeaders(StaticFiles(directory=CONSOLE_DIR))),
    ]
