"""`GET /console` over HTTP: only with an admin key, strict headers on the page and every asset,
no inline script or style, and every shipped file covered by the package data."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import httpx2
import pytest

from q2api.admin.console_routes import CONSOLE_DIR, CONSOLE_OFF_PAGE, CONTENT_SECURITY_POLICY
from tests.support.gateway_harness import ADMIN_KEY, Gateway, open_gateway

ASSETS = sorted(path.name for path in CONSOLE_DIR.iterdir() if path.name != "index.html")
STRICT_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def assert_strict(response: httpx2.Response) -> None:
    for name, value in STRICT_HEADERS.items():
        assert response.headers.get(name) == value, (response.url, name, response.headers.get(name))
    assert "set-cookie" not in response.headers


async def test_without_an_admin_key_the_console_does_not_exist(gw: Gateway) -> None:
    async with gw.http() as http:
        for path in ("/console/app.js", "/console/app.css", "/admin/api/accounts"):
            response = await http.get(path)
            assert response.status_code == 404, path
            assert response.json()["error"]["type"] == "not_found_error"


async def test_without_an_admin_key_the_console_page_says_how_to_turn_it_on_and_nothing_else(gw: Gateway) -> None:
    async with gw.http() as http:
        response = await http.get("/console")
    assert response.status_code == 404  # still nothing there
    assert response.headers["content-type"].startswith("text/html")
    assert_strict(response)
    assert "Q2API_ADMIN_KEY" in response.text and "restart" in response.text
    # Nothing about this gateway: a fixed page (no account, model, URL, version), and no script.
    assert response.text == CONSOLE_OFF_PAGE
    for revealing in ("claude", "http", "<script", "127.0.0.1"):
        assert revealing not in response.text.lower(), revealing


@pytest.fixture
async def console(tmp_path: Path):
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gateway:
        async with httpx2.AsyncClient(base_url=gateway.base_url, timeout=10) as http:
            yield http


async def test_the_page_and_its_assets_carry_strict_headers(console: httpx2.AsyncClient) -> None:
    page = await console.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert_strict(page)
    for name in ASSETS:
        asset = await console.get(f"/console/{name}")
        assert asset.status_code == 200, name
        expected = "text/javascript" if name.endswith(".js") else "text/css"
        assert asset.headers["content-type"].startswith(expected), (name, asset.headers["content-type"])
        assert_strict(asset)
    assert (await console.get("/console/no-such-file.js")).status_code == 404


async def test_the_page_is_served_without_the_admin_key_but_tells_nothing(console: httpx2.AsyncClient) -> None:
    # The page is public (it is what asks for the key); every answer with data needs the key.
    page = await console.get("/console")
    assert ADMIN_KEY not in page.text
    for path in ("/admin/api/accounts", "/admin/api/activity", "/admin/api/models"):
        assert (await console.get(path)).status_code == 401, path


async def test_assets_are_revalidated_rather_than_downloaded_again(console: httpx2.AsyncClient) -> None:
    first = await console.get("/console/app.js")
    again = await console.get("/console/app.js", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304
    assert_strict(again)


def test_the_page_has_no_inline_script_or_style_and_loads_nothing_from_elsewhere() -> None:
    html = (CONSOLE_DIR / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script>"
    assert "<style" not in html and " style=" not in html, "inline style"
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"
    for tag in re.findall(r"<(?:script|link)\b[^>]*>", html):
        assert re.search(r'(?:src|href)="(?:/console/|data:)', tag), tag
    for path in CONSOLE_DIR.iterdir():
        text = path.read_text()
        # Values from the gateway are set as text, never parsed as markup.
        assert not re.search(r"\.(?:inner|outer)HTML\b|insertAdjacentHTML|document\.write", text), path.name
        assert not re.search(r"""(?:import|from|fetch\()\s*['"`]https?:""", text), path.name
        assert not re.search(r"localStorage\.|document\.cookie", text), path.name


def test_every_console_file_is_package_data() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["q2api.admin"]
    for path in CONSOLE_DIR.iterdir():
        relative = path.relative_to(CONSOLE_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
