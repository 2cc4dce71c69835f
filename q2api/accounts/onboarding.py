"""Adding an account from a refresh token: checked by a real refresh, then stored.

Shared by `q2api accounts add` and `POST /admin/api/accounts`, so both refuse a
made-up or revoked token the same way instead of listing it as `active`.
"""

from __future__ import annotations

import dataclasses
import time

import aiohttp

from q2api.accounts.logins import account_id_for_label
from q2api.accounts.records import Account, AccountStatus
from q2api.accounts.refresh import RefreshedToken, RefreshEndpoints, refresh_access_token
from q2api.accounts.store_protocol import CredentialStore


@dataclasses.dataclass(frozen=True, repr=False)
class NewAccount:
    """What an operator gives to add an account (secrets included: never log it)."""

    label: str
    refresh_token: str
    client_id: str | None = None
    client_secret: str | None = None
    profile_arn: str | None = None
    region: str | None = None

    def __post_init__(self) -> None:
        if not self.label.strip():
            raise ValueError("label must not be empty")
        if not self.refresh_token.strip():
            raise ValueError("refresh_token must not be empty")
        if bool(self.client_id) != bool(self.client_secret):
            raise ValueError("client_id and client_secret go together (an IdC login); give both or neither")

    @property
    def auth_method(self) -> str:
        """IdC (Builder ID / IAM Identity Center) when a client registration is given, else Kiro social."""
        return "idc" if self.client_id else "social"

    def __repr__(self) -> str:
        return f"NewAccount(label={self.label!r}, auth_method={self.auth_method!r})"


async def verify_new_account(
    session: aiohttp.ClientSession, endpoints: RefreshEndpoints, new: NewAccount
) -> RefreshedToken:
    """One real refresh with the given credentials. Raises RefreshRejected or RefreshUnavailable."""
    now = time.time()
    candidate = Account(
        id="(new)",
        label=new.label,
        auth_method=new.auth_method,
        refresh_token=new.refresh_token,
        client_id=new.client_id,
        client_secret=new.client_secret,
        profile_arn=new.profile_arn,
        access_token=None,
        expires_at=None,
        status=AccountStatus.ACTIVE,
        status_detail=None,
        token_generation=0,
        created_at=now,
        updated_at=now,
        refreshed_at=None,
        region=new.region,
    )
    return await refresh_access_token(session, candidate, endpoints)


async def store_new_account(
    store: CredentialStore, new: NewAccount, verified: RefreshedToken | None
) -> tuple[Account, bool]:
    """Store `new` with the tokens of its verifying refresh; (account, True if it replaced one with the label).

    An existing account with the same label gets the new credentials (the fix
    for one that needs a new login). The refresh may have rotated the refresh
    token, so the rotated one is what is stored.
    """
    existing_id = account_id_for_label(await store.accounts(), new.label)
    account = await store.add(
        auth_method=new.auth_method,
        refresh_token=(verified.refresh_token if verified else None) or new.refresh_token,
        label=new.label,
        client_id=new.client_id,
        client_secret=new.client_secret,
        profile_arn=new.profile_arn or (verified.profile_arn if verified else None),
        access_token=verified.access_token if verified else None,
        expires_at=verified.expires_at if verified else None,
        account_id=existing_id,
        region=new.region,
    )
    return account, existing_id is not None
