"""An account with a proxy of its own is probed through it: every call, refreshes included, and the
report names the proxy's scheme only."""

from __future__ import annotations

import pytest

from tests.support.loopback_proxies import ConnectProxy, Socks5Proxy
from tests.support.probe_world import probe_world


@pytest.mark.parametrize(("proxy_class", "scheme"), [(Socks5Proxy, "socks5"), (ConnectProxy, "http")])
async def test_every_call_goes_through_the_accounts_proxy(tmp_path, proxy_class, scheme):
    async with (
        proxy_class(username="proxyuser", password="proxy-password-123") as proxy,
        probe_world(tmp_path, "q") as world,
    ):
        await world.add("social", proxy_url=proxy.url)
        outcome = await world.probe()
        calls = world.upstream_calls
    account = outcome.account()
    assert account["proxy"] == scheme
    assert account["stopped"] is None and outcome.step("tool_call")["outcome"] == "done"
    sent = bytes(proxy.sent)
    assert sent.count(b"HTTP/1.1") >= calls  # every call went through a tunnel of the proxy
    assert {tunnel.split(":")[0] for tunnel in proxy.tunnels} == {"127.0.0.1"}
    assert "proxy-password-123" not in outcome.text and "proxyuser" not in outcome.text
