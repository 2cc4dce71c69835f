"""Which proxy the environment assigns to an upstream URL (HTTP(S)_PROXY, NO_PROXY, credentials)."""

from __future__ import annotations

import pytest

from q2api.amazonq.proxy import ProxyRoute, proxy_route


@pytest.fixture(autouse=True)
def clean_proxy_environment(monkeypatch):
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")


def test_no_proxy_configured_means_a_direct_connection():
    assert proxy_route("https://q.us-east-1.amazonaws.com/") == ProxyRoute()


def test_the_scheme_picks_the_proxy(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain-proxy:3128")
    assert str(proxy_route("https://q.us-east-1.amazonaws.com/").proxy) == "http://secure-proxy:3128"
    assert str(proxy_route("http://127.0.0.1:9000/").proxy) == "http://plain-proxy:3128"


def test_no_proxy_exempts_matching_hosts(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", "amazonaws.com,localhost")
    assert proxy_route("https://q.us-east-1.amazonaws.com/") == ProxyRoute()
    assert proxy_route("https://prod.us-east-1.auth.desktop.kiro.dev/refreshToken").proxy is not None


def test_credentials_in_the_proxy_url_become_proxy_auth(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://alice:s3cret@proxy:3128")
    route = proxy_route("https://oidc.us-east-1.amazonaws.com/token")
    assert str(route.proxy) == "http://proxy:3128"
    assert route.proxy_auth is not None and route.proxy_auth.login == "alice"
