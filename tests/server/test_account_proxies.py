"""An account's own proxy: every call it makes goes through it, SOCKS5 and HTTP CONNECT alike.

The proxies are the tiny ones of tests/support/loopback_proxies.py, on 127.0.0.1: they record what
went through them, so a test reads there that the chat call, the refresh and the catalogue of the
proxied account crossed the proxy. A proxy's password never shows in a listing, an answer or a log.
"""

from __future__ import annotations

from pathlib import Path

import httpx2

from q2api.settings import load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, ask, capture_logs, gateway_settings, sdk
from tests.support.loopback_proxies import ConnectProxy, Socks5Proxy

CHAT_TARGET = b"X-Amz-Target: AmazonCodeWhispererStreamingService.GenerateAssistantResponse"
PROXY_PASSWORD = "proxy-pass-7f3a91"


async def test_the_environment_account_reaches_amazon_q_through_its_socks5_proxy(tmp_path: Path) -> None:
    async with (
        SimulatedUpstream(check_tokens=True) as sim,
        Socks5Proxy(username="gw", password=PROXY_PASSWORD) as proxy,
    ):
        settings = gateway_settings(sim, tmp_path, auth_method="social", AMAZONQ_PROXY=proxy.url)
        with capture_logs() as logs:
            async with running_gateway(settings) as url, sdk(url) as client:
                assert "through the tunnel" in await ask(client, "through the tunnel")
                opened = len(proxy.tunnels)
                for turn in range(3):  # the next turns reuse a pooled tunnel: no new proxy handshake
                    assert f"turn {turn}" in await ask(client, f"turn {turn}")
                assert len(proxy.tunnels) == opened
        sent = bytes(proxy.sent)
        assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{sim.port}"}
        assert CHAT_TARGET in sent  # the chat call
        assert b"POST /refreshToken" in sent  # the refresh that minted its token
        assert b"/ListAvailableModels" in sent or b"ListAvailableModels" in sent  # its catalogue
        assert proxy.refused == 0
        assert PROXY_PASSWORD not in logs.text


async def test_an_account_added_with_an_http_proxy_serves_through_it_and_is_listed_masked(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim, ConnectProxy(username="ops", password=PROXY_PASSWORD) as proxy:
        settings = load_settings(
            {
                "AMAZONQ_ENDPOINT": sim.url,
                "AMAZONQ_OIDC_ENDPOINT": sim.oidc_url,
                "AMAZONQ_KIRO_REFRESH_ENDPOINT": sim.kiro_refresh_url,
                "Q2API_DATA_DIR": str(tmp_path),
                "Q2API_API_KEYS": CLIENT_KEY,
                "Q2API_ADMIN_KEY": ADMIN_KEY,
            },
            env_file=None,
        )
        async with (
            running_gateway(settings) as url,
            httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20) as admin,
        ):
            added = await admin.post(
                "/admin/api/accounts",
                json={"label": "office", "refresh_token": SIM_REFRESH_TOKEN, "proxy": proxy.url},
            )
            assert added.status_code == 201, added.text
            assert added.json()["proxy"] == f"http://ops:…@127.0.0.1:{proxy.port}"
            assert b"POST /refreshToken" in proxy.sent  # the check before storing went through it too
            async with sdk(url) as client:
                assert "hello office" in await ask(client, "hello office")
            assert CHAT_TARGET in bytes(proxy.sent)
            listing = await admin.get("/admin/api/accounts")
            assert PROXY_PASSWORD not in listing.text and PROXY_PASSWORD not in added.text
            [account] = listing.json()["accounts"]
            assert account["proxy"] == f"http://ops:…@127.0.0.1:{proxy.port}"


async def test_a_proxy_that_refuses_its_credentials_stores_nothing_and_says_so_without_the_password(
    tmp_path: Path,
) -> None:
    async with SimulatedUpstream() as sim, Socks5Proxy(username="gw", password="the-right-one") as proxy:
        settings = load_settings(
            {
                **sim.env("social"),
                "Q2API_DATA_DIR": str(tmp_path),
                "Q2API_API_KEYS": CLIENT_KEY,
                "Q2API_ADMIN_KEY": ADMIN_KEY,
            },
            env_file=None,
        )
        wrong = f"socks5://gw:{PROXY_PASSWORD}@127.0.0.1:{proxy.port}"
        async with (
            running_gateway(settings) as url,
            httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20) as admin,
        ):
            refused = await admin.post(
                "/admin/api/accounts", json={"label": "blocked", "refresh_token": SIM_REFRESH_TOKEN, "proxy": wrong}
            )
            assert refused.status_code == 503, refused.text
            assert PROXY_PASSWORD not in refused.text
            assert proxy.refused == 1 and not proxy.tunnels
            labels = [account["label"] for account in (await admin.get("/admin/api/accounts")).json()["accounts"]]
            assert labels == ["environment"]


async def test_a_proxy_url_the_gateway_cannot_use_is_a_400_naming_the_field(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        settings = gateway_settings(sim, tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY)
        async with (
            running_gateway(settings) as url,
            httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20) as admin,
        ):
            for proxy in ("ftp://user:pw-SECRET@host:21", "socks5://host", "user:pw-SECRET@host:1080"):
                answer = await admin.post(
                    "/admin/api/accounts", json={"label": "x", "refresh_token": SIM_REFRESH_TOKEN, "proxy": proxy}
                )
                assert answer.status_code == 400, answer.text
                message = answer.json()["error"]["message"]
                assert "proxy" in message and "SECRET" not in message
