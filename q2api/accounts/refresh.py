"""The two refresh protocols: AWS SSO OIDC (IdC / Builder ID) and Kiro social.

Each call turns a refresh token into a new access token (and perhaps a rotated
refresh token). A social login learns its `profileArn` from the reply; an IdC
login without one asks `ListAvailableProfiles` after its refresh
(q2api.amazonq.profiles, docs/protocol.md#profiles), so an Identity Center account
carries its profile and a Builder ID one (which has none) does not. A Kiro API key is never refreshed: it
has no refresh token, and a key Amazon Q refuses is dead
(docs/protocol.md#kiro-api-keys), so asking to refresh one is a rejection.

Failures come out as two kinds only: :class:`RefreshRejected` (the refresh token
or client registration is dead: a human must log in again) and
:class:`RefreshUnavailable` (the token service is down: keep everything, try
again later). No token ever reaches a log line or an exception message.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, NamedTuple

import aiohttp
import orjson
from loguru import logger

from q2api.accounts.records import Account
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import API_KEY_AUTH
from q2api.amazonq.errors import RefreshRejected, RefreshUnavailable, sanitize_error_code
from q2api.amazonq.profiles import resolve_profile
from q2api.amazonq.proxy import proxy_route

# OAuth / OIDC error codes meaning "this credential will never work again" (docs/protocol.md#aws-sso-oidc).
_DEAD_CREDENTIAL_CODES = frozenset(
    {
        "invalid_grant",
        "invalid_client",
        "unauthorized_client",
        "expired_token",
        "access_denied",
        "InvalidGrantException",
        "InvalidClientException",
        "UnauthorizedClientException",
        "ExpiredTokenException",
        "AccessDeniedException",
    }
)
_DEFAULT_LIFETIME = 3600.0
PROFILE_LOOKUP_TIMEOUT = 10.0  # seconds per host for an IdC login's ListAvailableProfiles after its refresh


@dataclasses.dataclass(frozen=True, repr=False)
class RefreshedToken:
    access_token: str
    expires_at: float
    refresh_token: str | None  # None: the service did not rotate it, keep the old one
    profile_arn: str | None

    def __repr__(self) -> str:
        return f"RefreshedToken(expires_at={self.expires_at}, rotated={self.refresh_token is not None})"


# The AWS SSO OIDC host of a region; a configured endpoint of this shape follows an account's region.
_AWS_OIDC_HOST = re.compile(r"^https://oidc\.[a-z0-9-]+\.amazonaws\.com")


@dataclasses.dataclass(frozen=True)
class RefreshEndpoints:
    oidc: str  # base URL; POST {oidc}/token
    kiro: str  # full URL of the Kiro refreshToken call
    timeout: float = 30.0
    # Where an IdC login's profile is looked up after each refresh (q2api.amazonq.profiles.profile_hosts);
    # empty: never looked up.
    profile_hosts: tuple[str, ...] = ()

    def oidc_for(self, region: str | None) -> str:
        """The OIDC base URL for an IdC login made in `region`.

        The AWS endpoint (`https://oidc.<region>.amazonaws.com`) takes the
        account's region; any other configured endpoint (a proxy, a test
        double) serves every region as it is.
        """
        base = self.oidc.rstrip("/")
        if region and _AWS_OIDC_HOST.match(base):
            return _AWS_OIDC_HOST.sub(f"https://oidc.{region}.amazonaws.com", base)
        return base


async def refresh_access_token(
    session: aiohttp.ClientSession,
    account: Account,
    endpoints: RefreshEndpoints,
    *,
    proxies: AccountProxies | None = None,
) -> RefreshedToken:
    """Refresh `account` with the protocol its auth method needs, through its own proxy if it has one.

    `proxies` holds the sessions of accounts with a proxy (None: `session` for every account).
    """
    if account.auth_method == API_KEY_AUTH:
        raise RefreshRejected(
            account.label, "Amazon Q refused the Kiro API key (a key is never refreshed: add a new one)"
        )
    if not account.refresh_token:
        raise RefreshRejected(account.label, "no refresh token is configured")
    if account.auth_method == "idc":
        if not (account.client_id and account.client_secret):
            raise RefreshRejected(account.label, "the OIDC client id/secret are missing")
        url = endpoints.oidc_for(account.region) + "/token"
        body = {
            "clientId": account.client_id,
            "clientSecret": account.client_secret,
            "grantType": "refresh_token",
            "refreshToken": account.refresh_token,
        }
    else:
        url = endpoints.kiro
        body = {"refreshToken": account.refresh_token}
    proxies = proxies or AccountProxies(session)
    document = await _post_json(proxies, account, url, body, endpoints.timeout)
    refreshed = _refreshed_token(document, account.label)
    if account.auth_method == "idc" and endpoints.profile_hosts and not account.profile_arn:
        refreshed = await _with_profile(proxies, account, endpoints, refreshed)
    return refreshed


async def _with_profile(
    proxies: AccountProxies, account: Account, endpoints: RefreshEndpoints, refreshed: RefreshedToken
) -> RefreshedToken:
    """The refreshed token with the profile `ListAvailableProfiles` lists for it, if it lists one.

    Asked only while the account has none (a profile does not move), with a short timeout: requests
    may be waiting on this refresh, and a management host out of reach must not hold them long.
    """
    lookup = await resolve_profile(
        proxies,
        endpoints.profile_hosts,
        refreshed.access_token,
        region=account.region,
        proxy_url=account.proxy_url,
        timeout=min(endpoints.timeout, PROFILE_LOOKUP_TIMEOUT),
    )
    if lookup.arn is None:
        logger.bind(account=account.label).info(f"no Amazon Q profile for this login ({lookup.detail})")
        return refreshed
    logger.info("Amazon Q profile found", account=account.label, profile_arn=lookup.arn)
    return dataclasses.replace(refreshed, profile_arn=lookup.arn)


class JsonReply(NamedTuple):
    status: int
    raw: bytes
    error_type: str | None  # the `x-amzn-errortype` header of an AWS error


async def post_json(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    timeout: float,
    *,
    route: dict[str, Any] | None = None,
) -> JsonReply:
    """POST a JSON body to an AWS token service (OIDC, Kiro); transport failures raise as aiohttp/TimeoutError.

    `route`: the proxy options (q2api.amazonq.account_proxies); by default HTTP(S)_PROXY's, resolved
    per call (these calls are rare: it keeps the function stateless).
    """
    async with session.post(
        url,
        **(proxy_route(url)._asdict() if route is None else route),
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        timeout=aiohttp.ClientTimeout(total=timeout),
    ) as response:
        return JsonReply(response.status, await response.read(), response.headers.get("x-amzn-errortype"))


async def _post_json(
    proxies: AccountProxies, account: Account, url: str, body: dict[str, Any], timeout: float
) -> dict[str, Any]:
    label, auth_method = account.label, account.auth_method
    session, route = proxies.route(account.proxy_url, url)
    try:
        status, raw, error_type = await post_json(session, url, body, timeout, route=route)
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise RefreshUnavailable(
            f"the token service for account {label!r} is unreachable ({type(exc).__name__})"
        ) from None

    document = json_object(raw)
    if status == 200 and document is not None:
        return document
    code = oauth_error_code(document) or sanitize_error_code(error_type)
    if _credential_is_dead(status, code, auth_method):
        raise RefreshRejected(label, f"HTTP {status} {code or 'unauthorized'}{_description(document)}")
    if status == 200:
        raise RefreshUnavailable(f"the token service for account {label!r} sent an unreadable reply")
    raise RefreshUnavailable(f"the token service for account {label!r} failed: HTTP {status} {code or ''}".strip())


def _credential_is_dead(status: int, code: str | None, auth_method: str) -> bool:
    if status in (401, 403) or (400 <= status < 500 and code in _DEAD_CREDENTIAL_CODES):
        return True
    # The Kiro service has no documented error schema: a plain 400 there means
    # the refresh token was refused (the peers all treat it so).
    return auth_method == "social" and status == 400


def _refreshed_token(document: dict[str, Any], label: str) -> RefreshedToken:
    access_token = document.get("accessToken")
    if not isinstance(access_token, str) or not access_token:
        raise RefreshUnavailable(f"the token service for account {label!r} sent no access token")
    expires_in = document.get("expiresIn")
    lifetime = float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else _DEFAULT_LIFETIME
    refresh_token = document.get("refreshToken")
    profile_arn = document.get("profileArn")
    return RefreshedToken(
        access_token=access_token,
        expires_at=time.time() + lifetime,
        refresh_token=refresh_token if isinstance(refresh_token, str) and refresh_token else None,
        profile_arn=profile_arn if isinstance(profile_arn, str) and profile_arn else None,
    )


def json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        document = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


def _description(document: dict[str, Any] | None) -> str:
    description = (document or {}).get("error_description")
    return f": {description[:200]}" if isinstance(description, str) and description else ""


def oauth_error_code(document: dict[str, Any] | None) -> str | None:
    if document is None:
        return None
    for key in ("error", "__type", "code"):
        value = document.get(key)
        if isinstance(value, str) and value:
            return sanitize_error_code(value)
    return None
