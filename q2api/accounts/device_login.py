"""Device-code login with AWS SSO OIDC: a new Builder ID or IAM Identity Center account.

Three calls (docs/protocol.md#device-code-login; botocore's `sso-oidc` model):

1. `POST {oidc}/client/register` (RegisterClient): a public client with the
   CodeWhisperer scopes → `clientId`, `clientSecret`, `clientSecretExpiresAt`;
2. `POST {oidc}/device_authorization` (StartDeviceAuthorization) with the
   start URL → `deviceCode`, `userCode`, `verificationUri(Complete)`,
   `expiresIn`, `interval`;
3. `POST {oidc}/token` (CreateToken, device-code grant), polled every
   `interval` seconds while the user approves in a browser:
   `authorization_pending` → wait; `slow_down` → wait 5 s longer from then
   on (RFC 8628); `expired_token` or the deadline → expired;
   `access_denied` → denied; 200 → the access and refresh tokens.

Protocol only: the caller chooses the endpoint, start URL and what to do with
the tokens. No secret reaches a log line, an exception or a repr.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from loguru import logger

from q2api.accounts.refresh import json_object, oauth_error_code, post_json
from q2api.amazonq.errors import sanitize_error_code

BUILDER_ID_START_URL = "https://view.awsapps.com/start"
BUILDER_ID_REGION = "us-east-1"
SCOPES = ("codewhisperer:completions", "codewhisperer:analysis", "codewhisperer:conversations")
CLIENT_NAME = "q2api"
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SLOW_DOWN_STEP = 5.0  # seconds added to the polling interval by each `slow_down`
_DEFAULT_INTERVAL = 5.0
# An AWS region name (`us-east-1`, `eu-central-1`, `us-gov-west-1`): it becomes part of a host name.
_AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")  # whole names only: `fullmatch` (`$` allows a newline)
# The exception names AWS puts in `x-amzn-ErrorType`, for a reply whose body lacks the OAuth code.
_CODES_BY_EXCEPTION = {
    "AuthorizationPendingException": "authorization_pending",
    "SlowDownException": "slow_down",
    "ExpiredTokenException": "expired_token",
    "AccessDeniedException": "access_denied",
}
_DEFAULT_TOKEN_LIFETIME = 3600.0


def is_aws_region(name: str) -> bool:
    return _AWS_REGION.fullmatch(name) is not None


def login_target(method: str, start_url: str | None, region: str | None) -> tuple[str, str]:
    """(start URL, region) of a `builder-id` or `idc` login; ValueError naming what is wrong."""
    region = region or BUILDER_ID_REGION
    if not is_aws_region(region):
        raise ValueError(f"region must be an AWS region name such as us-east-1, not {region!r}")
    if method == "builder-id":
        if start_url:
            raise ValueError("a start URL belongs to method idc (Builder ID has a fixed one)")
        return BUILDER_ID_START_URL, region
    if method == "idc":
        if not (start_url or "").startswith("https://"):
            raise ValueError("method idc needs the start URL of your IAM Identity Center (https://…)")
        return str(start_url), region
    raise ValueError(f"method must be builder-id or idc, not {method!r}")


class DeviceLoginError(Exception):
    """The login did not produce tokens; the message says why (never a secret)."""


class LoginDenied(DeviceLoginError):
    """The user refused the request in the browser (`access_denied`)."""


class LoginExpired(DeviceLoginError):
    """Nobody approved the code before it expired (`expired_token`, or the deadline passed)."""


class LoginFailed(DeviceLoginError):
    """The OIDC service refused a call or could not be reached."""


@dataclasses.dataclass(frozen=True, repr=False)
class ClientRegistration:
    client_id: str
    client_secret: str
    expires_at: float | None  # epoch seconds; registrations expire (then a new login is needed)

    def __repr__(self) -> str:
        return f"ClientRegistration(expires_at={self.expires_at})"


@dataclasses.dataclass(frozen=True, repr=False)
class DeviceAuthorization:
    device_code: str  # a secret between us and the OIDC service
    user_code: str  # shown to the user, who types or confirms it in the browser
    verification_uri: str
    verification_uri_complete: str
    expires_in: float
    interval: float

    def __repr__(self) -> str:
        return f"DeviceAuthorization(user_code={self.user_code!r}, expires_in={self.expires_in})"


@dataclasses.dataclass(frozen=True, repr=False)
class LoginTokens:
    access_token: str
    refresh_token: str
    expires_at: float  # epoch seconds

    def __repr__(self) -> str:
        return f"LoginTokens(expires_at={self.expires_at})"


@dataclasses.dataclass(frozen=True)
class DeviceLogin:
    """A login waiting for the user: show `authorization`'s URL and code, then `wait_for_approval`."""

    oidc_url: str
    registration: ClientRegistration
    authorization: DeviceAuthorization
    started_at: float  # time.monotonic() when the authorization was granted

    @property
    def deadline(self) -> float:
        return self.started_at + self.authorization.expires_in


Sleep = Callable[[float], Awaitable[None]]


async def start_device_login(
    session: aiohttp.ClientSession, oidc_url: str, start_url: str, *, timeout: float = 30.0
) -> DeviceLogin:
    """Register a client and start the device authorization. Raises LoginFailed."""
    base = oidc_url.rstrip("/")
    registered = await _expect_ok(
        session,
        f"{base}/client/register",
        {"clientName": CLIENT_NAME, "clientType": "public", "scopes": list(SCOPES)},
        timeout,
        "RegisterClient",
    )
    registration = ClientRegistration(
        client_id=_required(registered, "clientId", "RegisterClient"),
        client_secret=_required(registered, "clientSecret", "RegisterClient"),
        expires_at=_number(registered.get("clientSecretExpiresAt")),
    )
    started = await _expect_ok(
        session,
        f"{base}/device_authorization",
        {"clientId": registration.client_id, "clientSecret": registration.client_secret, "startUrl": start_url},
        timeout,
        "StartDeviceAuthorization",
    )
    verification_uri = _required(started, "verificationUri", "StartDeviceAuthorization")
    authorization = DeviceAuthorization(
        device_code=_required(started, "deviceCode", "StartDeviceAuthorization"),
        user_code=_required(started, "userCode", "StartDeviceAuthorization"),
        verification_uri=verification_uri,
        verification_uri_complete=_text(started.get("verificationUriComplete")) or verification_uri,
        expires_in=_number(started.get("expiresIn")) or 600.0,
        interval=_number(started.get("interval")) or _DEFAULT_INTERVAL,
    )
    return DeviceLogin(base, registration, authorization, time.monotonic())


async def wait_for_approval(
    session: aiohttp.ClientSession,
    login: DeviceLogin,
    *,
    timeout: float = 30.0,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> LoginTokens:
    """Poll CreateToken until the user approves. Raises LoginDenied, LoginExpired or LoginFailed."""
    interval = login.authorization.interval
    body = {
        "clientId": login.registration.client_id,
        "clientSecret": login.registration.client_secret,
        "grantType": DEVICE_CODE_GRANT,
        "deviceCode": login.authorization.device_code,
    }
    while True:
        await sleep(interval)
        if clock() >= login.deadline:
            raise LoginExpired("the code expired before the login was approved")
        try:
            status, document, code = await _post(session, f"{login.oidc_url}/token", body, timeout)
        except LoginFailed as exc:
            logger.warning(f"device login: polling failed, trying again: {exc}")  # a blip must not end the login
            continue
        if status == 200 and document is not None:
            return _tokens(document)
        if code == "authorization_pending":
            continue
        if code == "slow_down":
            interval += SLOW_DOWN_STEP
            continue
        if code == "expired_token":
            raise LoginExpired("the code expired before the login was approved")
        if code == "access_denied":
            raise LoginDenied("the login was denied in the browser")
        if status >= 500:
            logger.warning(f"device login: the token service failed (HTTP {status}), trying again")
            continue
        raise LoginFailed(f"CreateToken was refused: HTTP {status} {code or ''}".strip())


def _tokens(document: dict[str, Any]) -> LoginTokens:
    lifetime = _number(document.get("expiresIn")) or _DEFAULT_TOKEN_LIFETIME
    return LoginTokens(
        access_token=_required(document, "accessToken", "CreateToken"),
        refresh_token=_required(document, "refreshToken", "CreateToken"),
        expires_at=time.time() + lifetime,
    )


async def _expect_ok(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout: float, operation: str
) -> dict[str, Any]:
    status, document, code = await _post(session, url, body, timeout)
    if status != 200 or document is None:
        raise LoginFailed(f"{operation} was refused: HTTP {status} {code or ''}".strip())
    return document


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout: float
) -> tuple[int, dict[str, Any] | None, str | None]:
    """(status, JSON object or None, OAuth error code or None); transport failures raise LoginFailed."""
    try:
        status, raw, error_type = await post_json(session, url, body, timeout)
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise LoginFailed(f"the OIDC service is unreachable ({type(exc).__name__})") from None
    document = json_object(raw)
    code = None if status == 200 else oauth_error_code(document) or sanitize_error_code(error_type)
    return status, document, _CODES_BY_EXCEPTION.get(code or "", code)


def _required(document: dict[str, Any], key: str, operation: str) -> str:
    value = _text(document.get(key))
    if value is None:
        raise LoginFailed(f"{operation} answered without {key}")
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None
