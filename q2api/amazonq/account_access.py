"""What the upstream client needs of the accounts: a choice among them, and a token for the chosen one.

The accounts room (`q2api.accounts`: the pool and its token managers) implements these; the
upstream client is written against them only, so this protocol package imports nothing else of q2api.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from q2api.amazonq.errors import FailureKind


class Credential(Protocol):
    """One account's access to Amazon Q."""

    @property
    def account_id(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def auth_kind(self) -> str:
        """ "social", "idc" or "api_key" (q2api.amazonq.hosts.AuthKind): which hosts accept its token, and
        how it is sent (q2api.amazonq.bearer)."""
        ...

    @property
    def region(self) -> str | None:
        """Its region (an SSO region is mapped to its API region by q2api.amazonq.hosts.api_region)."""
        ...

    @property
    def proxy_url(self) -> str | None:
        """The proxy (`http://…`, `socks5://…`) every call of this account goes through; None: direct."""
        ...

    @property
    def profile_arn(self) -> str | None:
        """The `profileArn` its requests carry (known once a social login has refreshed)."""
        ...

    async def access_token(self) -> str:
        """A current access token, refreshed first if it is about to expire."""
        ...

    async def refresh_after_rejection(self, rejected_token: str) -> str:
        """A token to repeat a call with, after Amazon Q rejected `rejected_token` as invalid."""
        ...

    async def mark_needs_login(self, detail: str) -> None:
        """The account cannot serve until someone logs in again (suspended, token revoked)."""
        ...


class CredentialPool(Protocol):
    """The accounts that may serve, and what they did."""

    def __len__(self) -> int: ...

    def pick(self, exclude: Collection[str] = (), model: str | None = None) -> Credential | None:
        """The account to try next for `model`, avoiding `exclude`; None when no account may serve it."""
        ...

    def manager(self, account_id: str) -> Credential | None:
        """The account with this id, if it is in the pool."""
        ...

    def unfit(self, account_id: str, model: str | None = None) -> str | None:
        """Why this account should not take a request for `model` now ("disabled", "needs_login",
        "resting", "model": q2api.amazonq.turn_affinity.MoveReason), None when it may."""
        ...

    def has_alternative(self, exclude: Collection[str], model: str | None = None) -> bool:
        """Whether an account outside `exclude` could take a request for `model` now."""
        ...

    def model_refused(self, account_id: str, model: str) -> None:
        """Amazon Q answered INVALID_MODEL_ID for `model` on this account though its catalogue lists it: the
        account is not chosen for `model` for a while, and its catalogue is read again."""
        ...

    def report_success(self, account_id: str) -> None: ...

    def report_failure(
        self, account_id: str, kind: FailureKind | None, retry_after: float | None = None, detail: str | None = None
    ) -> None:
        """An attempt failed: `kind` for an error reply, None when Amazon Q or its token service was unreachable."""
        ...
