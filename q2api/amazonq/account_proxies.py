"""Each account's own proxy (`--proxy http://…|socks5://…`, AMAZONQ_PROXY): one client session per proxy.

An account may be reachable only through a proxy of its own (a region's egress, a corporate SOCKS
gateway), while the others go direct or through HTTP(S)_PROXY. aiohttp takes an HTTP proxy per
request but no SOCKS proxy at all, so every proxy URL gets a session of its own over an
aiohttp-socks connector, which speaks SOCKS4/5 and HTTP CONNECT alike and keeps its connections
(through the proxy) alive like the direct session's. Sessions are made on first use and closed
with the gateway.

A proxy URL may carry credentials (`socks5://user:password@host:1080`): they are secrets, so
`describe_proxy` is what logs, listings and errors show.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp

from q2api.amazonq.proxy import proxy_route

PROXY_SCHEMES = ("http", "https", "socks4", "socks5", "socks5h")


def check_proxy_url(value: str) -> str:
    """`value` stripped, if it is a proxy URL this gateway can use; raises ValueError saying what is wrong."""
    url = value.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(f"proxy must be a URL such as socks5://host:1080, not {describe_proxy(url)!r}") from None
    if parts.scheme.lower() not in PROXY_SCHEMES:
        raise ValueError(
            f"proxy scheme must be one of {', '.join(PROXY_SCHEMES)}, not {parts.scheme or '(none)'!r} "
            f"(in {describe_proxy(url)!r})"
        )
    if not parts.hostname:
        raise ValueError(f"proxy {describe_proxy(url)!r} names no host")
    if port is None and parts.scheme.lower().startswith("socks"):
        raise ValueError(f"proxy {describe_proxy(url)!r} needs a port (socks5://host:1080)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"proxy {describe_proxy(url)!r} must have no path, query or fragment")
    return url


def describe_proxy(url: str | None) -> str | None:
    """The proxy URL with its credentials masked (`socks5://user:…@host:1080`): safe to show."""
    if not url:
        return url
    scheme, separator, rest = url.partition("://")
    if not separator:
        return "…"  # not a URL: nothing tells which part might be a password
    userinfo, at, location = rest.rpartition("@")
    if not at:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user[:4] + '…' if len(user) > 4 else user}:…@{location}"


class AccountProxies:
    """The direct session, and one session per account proxy (call inside the running loop)."""

    def __init__(self, direct: aiohttp.ClientSession, *, keepalive_seconds: float | None = None) -> None:
        """`keepalive_seconds`: how long an idle tunnel stays pooled, as the direct session's connections do
        (Q2API_UPSTREAM_KEEPALIVE_SECONDS); None: aiohttp's default."""
        self.direct = direct
        self._keepalive = {} if keepalive_seconds is None else {"keepalive_timeout": keepalive_seconds}
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._env_routes: dict[str, dict[str, Any]] = {}  # per URL, resolved once (the URLs called are few)

    def session_for(self, proxy_url: str | None) -> aiohttp.ClientSession:
        """The session an account with `proxy_url` (None: no proxy of its own) calls through."""
        if not proxy_url:
            return self.direct
        session = self._sessions.get(proxy_url)
        if session is None or session.closed:
            # limit=0 as in the direct session: the 101st concurrent stream opens a connection instead of queueing.
            # Imported on the first proxied account: aiohttp-socks and python-socks cost a worker that has
            # none ~1 MB (BENCHMARKS.md, issue 33).
            from q2api.amazonq.proxy_connector import AccountProxyConnector

            connector = AccountProxyConnector.from_url(proxy_url, limit=0, ttl_dns_cache=300, **self._keepalive)
            session = self._sessions[proxy_url] = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None),
                headers=self.direct.headers,
            )
        return session

    def route(self, proxy_url: str | None, url: str) -> tuple[aiohttp.ClientSession, dict[str, Any]]:
        """The session and the request options that reach `url` for an account with `proxy_url`.

        An account's own proxy wins; without one, HTTP(S)_PROXY / NO_PROXY decide as before.
        """
        if proxy_url:
            return self.session_for(proxy_url), {}
        route = self._env_routes.get(url)
        if route is None:
            route = self._env_routes[url] = proxy_route(url)._asdict()
        return self.direct, route

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()
