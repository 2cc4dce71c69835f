"""What an account store holds, as plain data: accounts, their views, stats, login records, rests.

Shared by every store (the embedded SQLite file and the shared network
database), so the pool, the token managers and the CLI never know which one
they use.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import time

from q2api.amazonq.account_proxies import describe_proxy
from q2api.amazonq.bearer import API_KEY_AUTH

ENV_ACCOUNT_ID = "env"
AUTH_METHODS = ("idc", "social", API_KEY_AUTH)
LOGIN_RECORD_LIFETIME = 86400.0  # a login record older than a day is of no use to anyone


class AccountStatus(enum.StrEnum):
    ACTIVE = "active"
    # The refresh token was rejected or the account is suspended; an operator must sign in again.
    NEEDS_LOGIN = "needs_login"


@dataclasses.dataclass(frozen=True, repr=False)
class Account:
    """One stored account, secrets included. Its repr masks the secrets."""

    id: str
    label: str
    auth_method: str  # "idc" | "social" | "api_key"
    refresh_token: str | None  # None for a Kiro API key, which is never refreshed
    client_id: str | None
    client_secret: str | None
    profile_arn: str | None
    access_token: str | None  # a Kiro API key's account holds the key here (sent as the bearer)
    expires_at: float | None  # epoch seconds; None = unknown (an access token given without expiry, an API key)
    status: AccountStatus
    status_detail: str | None
    token_generation: int  # bumped on every token change, so stale copies are easy to spot
    created_at: float
    updated_at: float
    refreshed_at: float | None
    enabled: bool = True  # False: switched off by the operator, serves nothing
    region: str | None = None  # the OIDC region of an IdC login (None: the configured endpoint's)
    proxy_url: str | None = None  # every call of the account goes through it; may hold credentials: a secret

    def view(self) -> AccountView:
        return AccountView(
            id=self.id,
            label=self.label,
            auth_method=self.auth_method,
            status=self.status.value,
            status_detail=self.status_detail,
            has_refresh_token=bool(self.refresh_token),
            has_access_token=bool(self.access_token),
            client_id=mask(self.client_id),
            profile_arn=self.profile_arn,
            expires_at=self.expires_at,
            refreshed_at=self.refreshed_at,
            created_at=self.created_at,
            enabled=self.enabled,
            region=self.region,
            proxy=describe_proxy(self.proxy_url),
        )

    def __repr__(self) -> str:
        return f"Account(id={self.id!r}, label={self.label!r}, auth_method={self.auth_method!r}, status={self.status.value!r})"


@dataclasses.dataclass(frozen=True)
class AccountView:
    """What `q2api accounts list` may show: no secret, the client id shortened."""

    id: str
    label: str
    auth_method: str
    status: str
    status_detail: str | None
    has_refresh_token: bool
    has_access_token: bool
    client_id: str | None
    profile_arn: str | None
    expires_at: float | None
    refreshed_at: float | None
    created_at: float
    enabled: bool = True
    region: str | None = None
    proxy: str | None = None  # the proxy URL with its credentials masked


@dataclasses.dataclass(frozen=True, repr=False)
class EnvAccount:
    """The account configured through AMAZONQ_* variables."""

    auth_method: str
    refresh_token: str | None
    access_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    profile_arn: str | None = None
    label: str = "environment"
    proxy_url: str | None = None  # AMAZONQ_PROXY

    def fingerprint(self) -> str:
        # Identifies which env token seeded the row without storing it twice in the clear.
        source = f"refresh:{self.refresh_token}" if self.refresh_token else f"access:{self.access_token}"
        return hashlib.sha256(source.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"EnvAccount(auth_method={self.auth_method!r}, label={self.label!r})"


@dataclasses.dataclass(frozen=True)
class AccountStats:
    requests: int = 0  # calls to Amazon Q made with the account (retries included)
    failures: int = 0  # of which failed on the upstream's or the account's side
    last_error: str | None = None
    last_used_at: float | None = None  # epoch seconds


@dataclasses.dataclass
class StatsDelta:
    """One worker's counts for one account since its last flush, added to the stored ones."""

    requests: int = 0
    failures: int = 0
    last_error: str | None = None
    last_used_at: float | None = None


class LoginStatus(enum.StrEnum):
    PENDING = "pending"
    DONE = "done"
    EXPIRED = "expired"
    DENIED = "denied"
    FAILED = "failed"
    CANCELLED = "cancelled"  # by the operator (DELETE /admin/api/logins/{id})


@dataclasses.dataclass(frozen=True)
class LoginRecord:
    id: str
    label: str
    method: str
    status: LoginStatus
    account_id: str | None
    detail: str | None
    expires_at: float  # epoch seconds: the device code's end


def check_new_credentials(auth_method: str, client_id: str | None, client_secret: str | None) -> None:
    """What every store refuses before adding an account (raises ValueError)."""
    if auth_method not in AUTH_METHODS:
        raise ValueError(f"auth method must be 'idc', 'social' or 'api_key', not {auth_method!r}")
    if auth_method == "idc" and not (client_id and client_secret):
        raise ValueError("an IdC account needs its OIDC client id and client secret")


def login_record(
    login_id: str, label: str, method: str, status: str, account_id: str | None, detail: str | None, expires_at: float
) -> LoginRecord:
    """A stored login as the admin API reports it: a pending login past its code's end has expired."""
    state = LoginStatus(status)
    if state is LoginStatus.PENDING and expires_at <= time.time():
        state = LoginStatus.EXPIRED  # nobody finished it in time (or its worker went away)
    return LoginRecord(login_id, label, method, state, account_id, detail, expires_at)


@dataclasses.dataclass(frozen=True)
class AccountRest:
    """An account's cool-down, shared by every worker: it serves nothing new until `until`."""

    until: float  # epoch seconds
    reason: str  # the health it rests with (AccountHealth's value: "throttled", "quota_exhausted", …)


def mask(value: str | None) -> str | None:
    if not value:
        return value
    return value[:4] + "…" if len(value) > 8 else "…"
