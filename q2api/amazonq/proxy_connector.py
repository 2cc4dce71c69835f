"""aiohttp-socks' connector for an account's own proxy, its failures turned into aiohttp's errors.

A module of its own so that aiohttp-socks is imported only by a gateway with a proxied account
(q2api.amazonq.account_proxies imports it on first use).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp_socks import ProxyConnectionError, ProxyConnector, ProxyError, ProxyTimeoutError


class AccountProxyConnector(ProxyConnector):
    """aiohttp-socks' connector, whose failures come out as aiohttp's own errors, which every caller
    already handles as "Amazon Q unreachable" (or timed out): it raises them as its own classes, which
    are not aiohttp's and would otherwise escape as a 500.

    Their text is the proxy's answer ("Username and password authentication failure", a CONNECT
    status) or the socket error, never the proxy URL or its credentials.
    """

    async def _wrap_create_connection(self, *args: Any, **kwargs: Any) -> tuple[asyncio.Transport, ResponseHandler]:
        try:
            return await super()._wrap_create_connection(*args, **kwargs)
        except ProxyTimeoutError:
            raise aiohttp.ConnectionTimeoutError("the account's proxy did not answer in time") from None
        except (ProxyError, ProxyConnectionError) as exc:
            raise aiohttp.ClientConnectionError(f"the account's proxy failed: {exc}") from None
