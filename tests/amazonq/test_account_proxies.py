"""Account proxy URLs: which ones the gateway takes, and how they are shown (never their password)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.amazonq.account_proxies import check_proxy_url, describe_proxy
from q2api.amazonq.bearer import authorization_headers, token_type_of
from q2api.amazonq.web_search import mcp_headers, mcp_request


@pytest.mark.parametrize(
    "url",
    ["http://proxy.lan:3128", "https://proxy.lan", "socks5://u:p@10.0.0.9:1080", "socks4://h:1080", " socks5h://h:9 "],
)
def test_usable_proxy_urls(url: str) -> None:
    assert check_proxy_url(url) == url.strip()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://u:pw-SECRET@h:21", "scheme"),
        ("socks5://h", "port"),
        ("http://", "no host"),
        ("u:pw-SECRET@h:1080", "scheme"),
        ("http://h:3128/path", "path"),
        ("http://u:pw-SECRET@h:notaport", "URL"),
    ],
)
def test_unusable_proxy_urls_are_refused_naming_the_problem_not_the_password(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        check_proxy_url(url)
    assert "SECRET" not in str(refused.value)


_PART = st.text(st.characters(blacklist_characters="@/:", blacklist_categories=("Cs",)), min_size=1, max_size=12)


@given(scheme=st.sampled_from(["http", "socks5"]), user=_PART, password=_PART, host=_PART)
def test_a_described_proxy_never_shows_its_password(scheme: str, user: str, password: str, host: str) -> None:
    shown = describe_proxy(f"{scheme}://{user}:{password}@{host}:1080")
    assert shown is not None and shown.endswith(f"@{host}:1080") and shown.startswith(f"{scheme}://")
    assert f":{password}@" not in shown


def test_a_proxy_without_credentials_is_shown_as_it_is() -> None:
    assert describe_proxy("socks5://10.0.0.9:1080") == "socks5://10.0.0.9:1080"
    assert describe_proxy(None) is None
    assert describe_proxy("not a url with pw") == "…"


def test_a_kiro_api_key_is_sent_with_its_token_type_and_no_profile() -> None:
    assert authorization_headers("ksk_x", token_type_of("api_key")) == {
        "Authorization": "Bearer ksk_x",
        "tokentype": "API_KEY",
    }
    assert authorization_headers("tok", token_type_of("idc")) == {"Authorization": "Bearer tok"}
    headers = mcp_headers("ksk_x", None, token_type_of("api_key"))
    assert headers["tokentype"] == "API_KEY" and "profileArn" not in mcp_request("q", None)
