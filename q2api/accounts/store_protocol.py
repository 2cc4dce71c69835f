"""What the account store offers, split by concern so that each caller depends only on what it uses.

* `CredentialStore`: accounts, their tokens and the refresh lock (the pool, the token managers,
  device-code logins, imports);
* `TelemetryStore`: request counters and cool-downs shared by every worker (the reloader);
* `LoginStore`: device-code logins under way (the admin API);
* `ResponseStore` (q2api.stored_responses.store): stored Responses API conversations;
* `AccountStore`: the three account concerns together with `location` and `close`, as
  `open_account_store` (opening.py) returns the store.

One implementation serves them all, over the SQLite file or a shared PostgreSQL / MySQL
database (store.py). Its methods are coroutines, awaited on the event loop: a store never
blocks the loop, whatever it is made of. A shared store's connections belong to the event
loop that opened it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from q2api.accounts.records import (
    Account,
    AccountRest,
    AccountStats,
    AccountStatus,
    AccountView,
    EnvAccount,
    LoginRecord,
    LoginStatus,
    StatsDelta,
)


class CredentialStore(Protocol):
    """Accounts, their tokens and the refresh lock: what the pool, the token managers and logins use."""

    # -- reading ----------------------------------------------------------------

    async def get(self, account_id: str) -> Account | None: ...

    async def accounts(self) -> list[Account]:
        """Every account, oldest first."""
        ...

    async def list_views(self) -> list[AccountView]:
        """The listing for the CLI: never a secret."""
        ...

    async def generation(self) -> int:
        """A number that changes whenever an account is added, changed or removed (by any process)."""
        ...

    # -- account changes (each bumps the generation) -----------------------------

    async def add(
        self,
        *,
        auth_method: str,
        refresh_token: str | None,
        label: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        profile_arn: str | None = None,
        access_token: str | None = None,
        expires_at: float | None = None,
        account_id: str | None = None,
        region: str | None = None,
        proxy_url: str | None = None,
    ) -> Account:
        """Add an account, or replace the credentials of `account_id` (keeping its enabled flag).

        A Kiro API key account (`auth_method` "api_key") has no refresh token: its key is the access token.
        """
        ...

    async def import_account(self, account: Account) -> None:
        """Store `account` exactly as given (id, state and tokens), replacing one with its id."""
        ...

    async def remove(self, account_id: str) -> bool: ...

    async def update(self, account_id: str, *, enabled: bool | None = None, label: str | None = None) -> Account | None:
        """Switch an account on or off, or rename it; None when there is no such account."""
        ...

    async def seed_from_env(self, env: EnvAccount) -> Account:
        """Create or update the environment account, keeping a token the upstream rotated since."""
        ...

    # -- tokens -----------------------------------------------------------------

    def refresh_lock(self, account_id: str) -> AbstractAsyncContextManager[None]:
        """Held by whoever refreshes `account_id`'s token: one holder across every process sharing the store.

        The holder re-reads the account inside the lock and saves the refresh
        result (`save_tokens`) before leaving it, so the next holder finds the
        rotated refresh token. A holder that dies releases the lock.
        """
        ...

    async def save_tokens(
        self,
        account_id: str,
        *,
        access_token: str,
        expires_at: float | None,
        refresh_token: str | None = None,
        profile_arn: str | None = None,
        if_generation: int | None = None,
    ) -> Account | None:
        """Store a refresh result in one transaction; a None refresh token / ARN keeps the old one.

        With `if_generation`, only a row still at that token generation is updated
        (a late write must not undo a newer login). None when no row was updated.
        """
        ...

    async def set_status(self, account_id: str, status: AccountStatus, detail: str | None = None) -> None: ...


class TelemetryStore(Protocol):
    """Counters and cool-downs every worker adds to and reads back (the reloader's tick)."""

    async def add_stats(self, pending: Mapping[str, StatsDelta]) -> None:
        """Add one worker's counts to the stored ones (accounts removed meanwhile are skipped)."""
        ...

    async def read_stats(self) -> dict[str, AccountStats]:
        """Every account's stored counts, by account id (accounts never used have none)."""
        ...

    async def add_rests(self, rests: Mapping[str, AccountRest]) -> None:
        """Record account cool-downs, so every worker and replica rests the account too."""
        ...

    async def clear_rests(self, account_ids: Collection[str]) -> None:
        """End these accounts' cool-downs (the upstream has served them again)."""
        ...

    async def read_rests(self) -> dict[str, AccountRest]:
        """The cool-downs that have not run out yet, by account id."""
        ...


class LoginStore(Protocol):
    """Device-code logins under way, so any worker can answer for one (the admin API)."""

    async def record_login(self, login_id: str, label: str, method: str, expires_in: float) -> None: ...

    async def finish_login(
        self, login_id: str, status: LoginStatus, account_id: str | None = None, detail: str | None = None
    ) -> None: ...

    async def cancel_login(self, login_id: str, detail: str) -> bool:
        """Mark the login cancelled if it is still pending, in one statement; False: it had ended
        (or never was), and its record is left as it is."""
        ...

    async def read_login(self, login_id: str) -> LoginRecord | None: ...


class AccountStore(CredentialStore, TelemetryStore, LoginStore, Protocol):
    """The whole store, as opened: what assembles the gateway and the CLI hold."""

    @property
    def location(self) -> str:
        """Where the store is, for logs and the CLI (a database URL has its password masked)."""
        ...

    async def close(self) -> None:
        """Release the connections once running writes have finished (for a while: a hung database must not hang a shutdown)."""
        ...
