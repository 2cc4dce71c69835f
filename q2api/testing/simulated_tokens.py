"""The simulated Amazon Q upstream's token service: who gets an access token, and which bearers it takes.

* `POST /token`: the AWS SSO OIDC refresh grant, and the device-code grant of a login
  (q2api.testing.simulated_oidc, which also answers `POST /client/register` and
  `POST /device_authorization`);
* `POST /refreshToken`: the Kiro social refresh, which also names the account's `profileArn`;
* the bearer check every other endpoint makes: an access token this service issued (with
  `check_tokens=True`; any bearer otherwise), or a Kiro API key sent with `tokentype: API_KEY`
  (docs/protocol.md#kiro-api-keys).

Refresh calls fail the way the real services do when a test asks (`refresh_failure`), a refresh token
outside `valid_refresh_tokens` is refused with invalid_grant, and with `rotate_refresh_tokens` every
refresh hands out a new refresh token and retires the old one (`retired_refresh_uses` counts the calls
that presented a retired one anyway).

`TokenEndpoints` is a base of `SimulatedUpstream`: its state is the simulator's own
(`sim.refresh_failure = "invalid_grant"`, `sim.refresh_calls`), as the tests script it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from q2api.testing.recorded_requests import RecordedRequest, record_request
from q2api.testing.simulated_oidc import DEVICE_CODE_GRANT, SimulatedDeviceAuthorization
from q2api.testing.simulated_services import KEY_WITHOUT_TOKEN_TYPE


class TokenEndpoints:
    # Kept by SimulatedUpstream: the Kiro API keys its services accept (`add_api_key`).
    api_keys: set[str]

    def __init__(
        self,
        *,
        base_url: Callable[[], str],
        client: tuple[str, str],
        profile_arn: str,
        check_tokens: bool,
        token_lifetime: int,
        rotate_refresh_tokens: bool,
        refresh_delay: float,
    ) -> None:
        """`client`: the OIDC client registration (id, secret) refreshes must present; `profile_arn`: what a
        Kiro refresh names as the account's profile."""
        self.check_tokens = check_tokens
        self.token_lifetime = token_lifetime
        self.rotate_refresh_tokens = rotate_refresh_tokens
        self.refresh_delay = refresh_delay  # seconds each refresh call takes
        # Token state. `valid_refresh_tokens` None = accept any refresh token.
        self.valid_access_tokens: set[str] = set()
        self.valid_refresh_tokens: set[str] | None = None
        self.oidc_client: tuple[str, str] | None = client
        self.kiro_profile_arn = profile_arn
        # "invalid_grant" | "invalid_client" | "server_error" | None: how refresh calls fail.
        self.refresh_failure: str | None = None
        self.device = SimulatedDeviceAuthorization(base_url, self.issue_access_token)
        # access token -> the refresh token it was issued for, so each account can see its own catalogue
        self.token_accounts: dict[str, str] = {}
        # access token -> "social" (Kiro refresh) or "idc" (OIDC): which hosts refuse it (A8.3)
        self.token_kinds: dict[str, str] = {}
        self.refresh_requests: list[RecordedRequest] = []  # /token and /refreshToken calls (and logins)
        # Refresh tokens retired by a rotation, and how many refresh calls presented one anyway
        # (refused with invalid_grant when `valid_refresh_tokens` is a set).
        self.retired_refresh_tokens: set[str] = set()
        self.retired_refresh_uses = 0
        self._serial = itertools.count(1)

    # -- tokens a test hands out or takes back ------------------------------------------

    def issue_access_token(self) -> str:
        token = f"sim-access-{next(self._serial)}"
        self.valid_access_tokens.add(token)
        return token

    def add_api_key(self, key: str) -> str:
        """Accept the Kiro API key `key` from now on (it is its own account for the catalogue and credits)."""
        self.api_keys.add(key)
        self.token_accounts[key] = key
        return key

    def revoke_access_tokens(self) -> None:
        self.valid_access_tokens.clear()

    @property
    def refresh_calls(self) -> int:
        return len(self.refresh_requests)

    # -- the bearer check of every other endpoint ------------------------------------------

    def _token_accepted(self, access_token: str | None) -> bool:
        if access_token == KEY_WITHOUT_TOKEN_TYPE:
            return False
        if access_token in self.api_keys:
            return True
        return not self.check_tokens or access_token in self.valid_access_tokens

    def _token_kind(self, record: RecordedRequest) -> str | None:
        """ "api_key", "social", "idc", or None for a bearer this service did not issue."""
        if any(name.lower() == "tokentype" and value.upper() == "API_KEY" for name, value in record.headers.items()):
            return "api_key"
        return self.token_kinds.get(record.access_token or "")

    # -- the endpoints ------------------------------------------------------------------

    async def _refresh_request(self, request: web.Request) -> dict[str, Any]:
        """Record a refresh call, take the configured time over it, and return its JSON body."""
        record = await record_request(request)
        self.refresh_requests.append(record)
        body = record.body if isinstance(record.body, dict) else {}
        if body.get("refreshToken") in self.retired_refresh_tokens:
            self.retired_refresh_uses += 1
        if self.refresh_delay:
            await asyncio.sleep(self.refresh_delay)
        return body

    def _device_call(
        self, answer: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
    ) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.Response:
            record = await record_request(request)
            self.refresh_requests.append(record)
            return self._device_answer(*answer(record.body if isinstance(record.body, dict) else {}))

        return handle

    def _device_answer(self, status: int, document: dict[str, Any]) -> web.Response:
        headers = None if status == 200 else {"x-amzn-ErrorType": self.device.error_type(document)}
        return _json(document, status=status, headers=headers)

    async def _oidc_token(self, request: web.Request) -> web.Response:
        body = await self._refresh_request(request)
        if body.get("grantType") == DEVICE_CODE_GRANT:
            return self._device_answer(*self.device.token(body))
        failure = self.refresh_failure
        client = (body.get("clientId"), body.get("clientSecret"))
        registered = self.device.clients.get(str(client[0])) == client[1]
        if failure is None and self.oidc_client is not None and client != self.oidc_client and not registered:
            failure = "invalid_client"
        if failure is None and body.get("grantType") != "refresh_token":
            return _oidc_error(400, "unsupported_grant_type", "UnsupportedGrantTypeException")
        if failure is None and not self._refresh_token_valid(body.get("refreshToken")):
            failure = "invalid_grant"
        if failure == "invalid_client":
            return _oidc_error(401, "invalid_client", "InvalidClientException", "Client authentication failed")
        if failure == "invalid_grant":
            return _oidc_error(400, "invalid_grant", "InvalidGrantException", "Invalid refresh token provided")
        if failure is not None:
            return _oidc_error(500, "server_error", "InternalServerException")
        return _json(self._issue(str(body.get("refreshToken")), kiro=False))

    async def _kiro_refresh(self, request: web.Request) -> web.Response:
        body = await self._refresh_request(request)
        failure = self.refresh_failure
        if failure is None and not self._refresh_token_valid(body.get("refreshToken")):
            failure = "invalid_grant"
        if failure in ("invalid_grant", "invalid_client"):
            return _json({"message": "Invalid refresh token"}, status=401)
        if failure is not None:
            return _json({"message": "Internal error"}, status=500)
        return _json(self._issue(str(body.get("refreshToken")), kiro=True))

    def _refresh_token_valid(self, token: object) -> bool:
        if not isinstance(token, str) or not token:
            return False
        return self.valid_refresh_tokens is None or token in self.valid_refresh_tokens

    def _issue(self, old_refresh_token: str, *, kiro: bool) -> dict[str, Any]:
        access_token = self.issue_access_token()
        self.token_accounts[access_token] = old_refresh_token
        self.token_kinds[access_token] = "social" if kiro else "idc"
        document: dict[str, Any] = {
            "accessToken": access_token,
            "tokenType": "Bearer",
            "expiresIn": self.token_lifetime,
        }
        if self.rotate_refresh_tokens:
            new_refresh_token = f"sim-refresh-{next(self._serial)}"
            self.retired_refresh_tokens.add(old_refresh_token)
            if self.valid_refresh_tokens is not None:
                self.valid_refresh_tokens.discard(old_refresh_token)
                self.valid_refresh_tokens.add(new_refresh_token)
            document["refreshToken"] = new_refresh_token
        elif kiro:
            document["refreshToken"] = old_refresh_token
        if kiro:
            document["profileArn"] = self.kiro_profile_arn
        return document


def _json(document: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(document), content_type="application/json", headers=headers)


def _oidc_error(status: int, error: str, error_type: str, description: str = "") -> web.Response:
    return _json(
        {"error": error, "error_description": description or error},
        status=status,
        headers={"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazonaws.sso.oidc/"},
    )
