"""Device-code logins that end in a stored account, and their records in the store.

The worker that starts a login polls the token service; the login's status is
kept in the store's `logins` table, so every worker (and replica) can answer
"is it done yet?". A login whose worker went away before the end stays
`pending` until its code expires, then reads as `expired`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import aiohttp
from loguru import logger

from q2api.accounts.device_login import (
    DeviceLogin,
    LoginDenied,
    LoginExpired,
    wait_for_approval,
)
from q2api.accounts.records import Account, LoginStatus
from q2api.accounts.store_protocol import CredentialStore
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.hosts import api_region
from q2api.amazonq.profiles import resolve_profile


def new_login_id() -> str:
    return "login_" + uuid.uuid4().hex[:16]


def account_id_for_label(accounts: Sequence[Account], label: str) -> str | None:
    """The id of the one account labelled `label` (a new login replaces its credentials), else None.

    Raises ValueError when several accounts carry the label.
    """
    matches = [account.id for account in accounts if account.label == label]
    if len(matches) > 1:
        raise ValueError(f"{len(matches)} accounts are labelled {label!r}; remove the extra ones first")
    return matches[0] if matches else None


async def complete_device_login(
    session: aiohttp.ClientSession,
    store: CredentialStore,
    login: DeviceLogin,
    *,
    label: str,
    region: str | None,
    profile_hosts: Sequence[str] = (),
) -> Account:
    """Wait for the user's approval, then store the account (an existing one with `label` is replaced),
    with the profile `ListAvailableProfiles` lists for it on `profile_hosts` (a Builder ID login has none).

    Raises LoginDenied, LoginExpired or LoginFailed (q2api.accounts.device_login).
    """
    tokens = await wait_for_approval(session, login)
    profile_arn = None
    if profile_hosts:
        lookup = await resolve_profile(
            AccountProxies(session), profile_hosts, tokens.access_token, region=api_region(region)
        )
        profile_arn = lookup.arn
        if profile_arn is None:
            logger.bind(account=label).info(f"no Amazon Q profile for this login ({lookup.detail})")
    existing = await store.accounts()
    return await store.add(
        auth_method="idc",
        refresh_token=tokens.refresh_token,
        access_token=tokens.access_token,
        expires_at=tokens.expires_at,
        client_id=login.registration.client_id,
        client_secret=login.registration.client_secret,
        label=label,
        region=region,
        account_id=account_id_for_label(existing, label),
        profile_arn=profile_arn,
    )


def status_of_failure(exc: Exception) -> LoginStatus:
    if isinstance(exc, LoginDenied):
        return LoginStatus.DENIED
    if isinstance(exc, LoginExpired):
        return LoginStatus.EXPIRED
    return LoginStatus.FAILED
