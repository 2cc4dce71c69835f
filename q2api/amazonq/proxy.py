"""HTTP(S)_PROXY / NO_PROXY for the few fixed URLs the gateway calls, resolved from the environment.

aiohttp's `trust_env=True` does the same lookup, but on every request, and it
also searches `~/.netrc` for credentials in a thread pool each time: a thread
hop before every upstream call. The gateway calls a few fixed URLs (its hosts,
the token services), so q2api.amazonq.account_proxies resolves each one's proxy
once and the callers pass it explicitly.
"""

from __future__ import annotations

from typing import NamedTuple

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL


class ProxyRoute(NamedTuple):
    proxy: URL | None = None
    proxy_auth: aiohttp.BasicAuth | None = None


def proxy_route(url: str) -> ProxyRoute:
    """The proxy (and its credentials) the environment assigns to `url`; empty when there is none."""
    try:
        # aiohttp's own resolver, so the rules (NO_PROXY, credentials in the URL or ~/.netrc) match trust_env.
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:
        return ProxyRoute()
    return ProxyRoute(proxy, auth)
