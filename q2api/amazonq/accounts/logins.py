"""Device-code logins that end in a stored account, and their records in the store.

The worker that starts a login polls the token service; the login's status is
kept in the store's `logins` table, so every worker (and replica) can answer
"is it done yet?". A login whose worker went away before the end stays
`pending` until its code expires, then reads as `expired`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
import uuid
from collections.abc import Sequence

import aiohttp

from q2api.amazonq.accounts.device_login import (
    DeviceLogin,
    LoginDenied,
    LoginExpired,
    wait_for_approval,
)
from q2api.amazonq.accounts.store import Account, AccountStore


class LoginStatus(enum.StrEnum):
    PENDING = "pending"
    DONE = "done"
    EXPIRED = "expired"
    DENIED = "denied"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class LoginRecord:
    id: str
    label: str
    method: str
    status: LoginStatus
    account_id: str | None
    detail: str | None
    expires_at: float  # epoch seconds: the device code's end


def new_login_id() -> str:
    return "login_" + uuid.uuid4().hex[:16]


def record_login(store: AccountStore, login_id: str, label: str, method: str, expires_in: float) -> None:
    now = time.time()
    with store.transaction() as db:
        db.execute(
            "INSERT INTO logins (id, label, method, status, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (login_id, label, method, LoginStatus.PENDING.value, now + expires_in, now),
        )
        # Keep the table small: logins older than a day are of no use to anyone.
        db.execute("DELETE FROM logins WHERE created_at < ?", (now - 86400,))


def finish_login(
    store: AccountStore, login_id: str, status: LoginStatus, account_id: str | None = None, detail: str | None = None
) -> None:
    with store.transaction() as db:
        db.execute(
            "UPDATE logins SET status = ?, account_id = ?, detail = ? WHERE id = ?",
            (status.value, account_id, detail, login_id),
        )


def read_login(store: AccountStore, login_id: str) -> LoginRecord | None:
    with store.connect() as db:
        row = db.execute("SELECT * FROM logins WHERE id = ?", (login_id,)).fetchone()
    if row is None:
        return None
    status = LoginStatus(row["status"])
    if status is LoginStatus.PENDING and row["expires_at"] <= time.time():
        status = LoginStatus.EXPIRED  # nobody finished it in time (or its worker went away)
    return LoginRecord(
        row["id"], row["label"], row["method"], status, row["account_id"], row["detail"], row["expires_at"]
    )


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
    store: AccountStore,
    login: DeviceLogin,
    *,
    label: str,
    region: str | None,
) -> Account:
    """Wait for the user's approval, then store the account (an existing one with `label` is replaced).

    Raises LoginDenied, LoginExpired or LoginFailed (q2api.amazonq.accounts.device_login).
    """
    tokens = await wait_for_approval(session, login)
    existing = await asyncio.to_thread(store.accounts)
    return await asyncio.to_thread(
        store.add,
        auth_method="idc",
        refresh_token=tokens.refresh_token,
        access_token=tokens.access_token,
        expires_at=tokens.expires_at,
        client_id=login.registration.client_id,
        client_secret=login.registration.client_secret,
        label=label,
        region=region,
        account_id=account_id_for_label(existing, label),
    )


def status_of_failure(exc: Exception) -> LoginStatus:
    if isinstance(exc, LoginDenied):
        return LoginStatus.DENIED
    if isinstance(exc, LoginExpired):
        return LoginStatus.EXPIRED
    return LoginStatus.FAILED
