"""The AWS SSO OIDC device-code endpoints of the simulated upstream.

`POST /client/register` and `POST /device_authorization` answer as the real
service does (field names from botocore's `sso-oidc` model); the device-code
grant of `POST /token` answers each poll with the next entry of `answers`
(`authorization_pending`, `slow_down`, `expired_token`, `access_denied` or
`grant`) and grants once they run out — by default after two
`authorization_pending` polls, as if the user took a moment to approve.
Registered clients and the tokens issued here work for later refreshes.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import Any

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
GRANT = "grant"
_ERRORS = {
    "authorization_pending": ("AuthorizationPendingException", "Authorization is still pending"),
    "slow_down": ("SlowDownException", "Client is polling too fast"),
    "expired_token": ("ExpiredTokenException", "Device code has expired"),
    "access_denied": ("AccessDeniedException", "The user denied the request"),
}


@dataclasses.dataclass
class _Authorization:
    client_id: str
    start_url: str
    user_code: str
    expires_at: float
    answered: bool = False


class SimulatedDeviceAuthorization:
    def __init__(self, base_url: Callable[[], str], issue_access_token: Callable[[], str]) -> None:
        self._base_url = base_url
        self._issue_access_token = issue_access_token
        self._serial = itertools.count(1)
        self.interval: float = 1  # seconds the client is told to wait between polls
        self.expires_in: float = 600
        self.answers: collections.deque[str] = collections.deque(["authorization_pending"] * 2)
        self.clients: dict[str, str] = {}  # client id -> client secret, for every registration
        self.authorizations: dict[str, _Authorization] = {}  # by device code
        self.polls: list[tuple[float, str]] = []  # (time.monotonic(), the answer given)
        self.issued_refresh_tokens: list[str] = []

    def register(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body.get("clientType") != "public" or not body.get("clientName"):
            return 400, _error("invalid_client_metadata", "clientName and clientType public are required")
        serial = next(self._serial)
        client_id, client_secret = f"sim-registered-client-{serial}", f"sim-registered-secret-{serial}"
        self.clients[client_id] = client_secret
        now = int(time.time())
        return 200, {
            "clientId": client_id,
            "clientSecret": client_secret,
            "clientIdIssuedAt": now,
            "clientSecretExpiresAt": now + 90 * 86400,
        }

    def start(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not self._client_known(body):
            return 401, _error("invalid_client", "Unknown client")
        if not body.get("startUrl"):
            return 400, _error("invalid_request", "startUrl is required")
        serial = next(self._serial)
        device_code, user_code = f"sim-device-{serial}", f"SIMU-{serial:04d}"
        self.authorizations[device_code] = _Authorization(
            str(body["clientId"]), str(body["startUrl"]), user_code, time.monotonic() + self.expires_in
        )
        verification_uri = f"{self._base_url()}/device"
        return 200, {
            "deviceCode": device_code,
            "userCode": user_code,
            "verificationUri": verification_uri,
            "verificationUriComplete": f"{verification_uri}?user_code={user_code}",
            "expiresIn": self.expires_in,
            "interval": self.interval,
        }

    def token(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """CreateToken with the device-code grant."""
        if not self._client_known(body):
            return 401, _error("invalid_client", "Unknown client")
        authorization = self.authorizations.get(str(body.get("deviceCode")))
        if authorization is None or authorization.answered or authorization.client_id != body.get("clientId"):
            return 400, _error("invalid_grant", "Invalid device code")
        answer = self.answers.popleft() if self.answers else GRANT
        if time.monotonic() > authorization.expires_at:
            answer = "expired_token"
        self.polls.append((time.monotonic(), answer))
        if answer != GRANT:
            if answer in ("expired_token", "access_denied"):
                authorization.answered = True
            return 400, _error(answer, _ERRORS[answer][1])
        authorization.answered = True
        refresh_token = f"sim-refresh-device-{next(self._serial)}"
        self.issued_refresh_tokens.append(refresh_token)
        return 200, {
            "accessToken": self._issue_access_token(),
            "tokenType": "Bearer",
            "expiresIn": 3600,
            "refreshToken": refresh_token,
        }

    def error_type(self, document: dict[str, Any]) -> str:
        """The `x-amzn-ErrorType` header value for an error document made here."""
        name = _ERRORS.get(str(document.get("error")), ("InvalidRequestException", ""))[0]
        return f"{name}:http://internal.amazon.com/coral/com.amazonaws.sso.oidc/"

    def _client_known(self, body: dict[str, Any]) -> bool:
        client_id = body.get("clientId")
        return isinstance(client_id, str) and self.clients.get(client_id) == body.get("clientSecret")


def _error(code: str, description: str) -> dict[str, Any]:
    return {"error": code, "error_description": description}
