"""Per-account access tokens: refreshed ahead of expiry, once, however many requests ask.

Single flight on two levels:

* within a process, concurrent callers share one refresh task (shielded, so a
  client that disconnects mid-refresh cannot lose a rotated refresh token);
* across `--workers` processes and replicas, the refresh runs under the
  store's refresh lock (a file lock for SQLite, a database lock for a shared
  store) and re-reads the store inside the lock, so a token that another
  worker has just refreshed is adopted instead of refreshed again (which would
  also spend a refresh token the other worker already rotated).

A store that cannot be reached (down, or frozen past the database deadline)
does not stop an account whose token is still valid: the refresh waits, with
a growing delay between attempts, and requests are served on the current
token meanwhile (one WARNING when the outage begins, one INFO when it ends).
Only a token that has actually expired and cannot be refreshed stops serving:
refreshing without the store's lock could spend a refresh token another
replica is rotating at the same moment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable

from loguru import logger

from q2api.accounts.records import Account, AccountStatus
from q2api.accounts.refresh import RefreshedToken
from q2api.accounts.store_protocol import CredentialStore
from q2api.accounts.token_saver import TokenSaver
from q2api.amazonq.bearer import API_KEY_AUTH
from q2api.amazonq.errors import RefreshRejected, RefreshUnavailable
from q2api.amazonq.observer import (
    NO_OBSERVER,
    REFRESH_ADOPTED,
    REFRESH_REJECTED,
    REFRESH_SUCCESS,
    REFRESH_UNAVAILABLE,
    UpstreamObserver,
)
from q2api.store.errors import STORE_ERRORS

RefreshCall = Callable[[Account], Awaitable[RefreshedToken]]

# Refresh this long before the token expires, so no request starts with a token about to die.
DEFAULT_REFRESH_MARGIN = 300.0
# While an account needs a new login, look this often whether the operator has fixed it.
_REJECTED_RECHECK_INTERVAL = 5.0
# After the store failed a refresh, wait this long before the next attempt, doubling up to the maximum.
STORE_RETRY_DELAY = 1.0
STORE_RETRY_DELAY_MAX = 60.0


class TokenManager:
    """The access token of one account."""

    def __init__(
        self,
        account: Account,
        store: CredentialStore,
        refresh: RefreshCall,
        *,
        refresh_margin: float = DEFAULT_REFRESH_MARGIN,
        clock: Callable[[], float] = time.time,
        observer: UpstreamObserver = NO_OBSERVER,
    ) -> None:
        self._account = account
        self._observer = observer
        self._store = store
        self._refresh_call = refresh
        self._margin = refresh_margin
        self._clock = clock
        self._inflight: asyncio.Task[str] | None = None
        self._manual_refresh: asyncio.Task[Account] | None = None  # the operator's refresh, shared by callers
        self._rejected: RefreshRejected | None = None
        self._invalidated: str | None = None  # a token invalidate() retired: never adopt it again
        self._rejected_checked_at = 0.0
        self._saver = TokenSaver(store, account.id, account.label)
        self._store_retry_at = 0.0  # while the store is failing: no refresh attempt before this time
        self._store_retry_delay = 0.0  # the last wait between attempts (0: the store works)
        if account.status is AccountStatus.NEEDS_LOGIN:
            self._rejected = RefreshRejected(account.label, account.status_detail or "refresh token rejected earlier")

    @property
    def account_id(self) -> str:
        return self._account.id

    @property
    def label(self) -> str:
        return self._account.label

    @property
    def auth_kind(self) -> str:
        return self._account.auth_method

    @property
    def region(self) -> str | None:
        return self._account.region

    @property
    def profile_arn(self) -> str | None:
        # A Kiro API key's requests carry none, whatever a row may hold (docs/protocol.md#profiles).
        return None if self._account.auth_method == API_KEY_AUTH else self._account.profile_arn

    @property
    def proxy_url(self) -> str | None:
        return self._account.proxy_url

    @property
    def needs_login(self) -> bool:
        return self._rejected is not None

    @property
    def has_unsaved_tokens(self) -> bool:
        """A refresh succeeded but the store has not taken its tokens yet (they are served from memory)."""
        return self._saver.has_unsaved

    async def access_token(self) -> str:
        """A token valid for at least the refresh margin (or of unknown expiry and not yet rejected).

        Raises RefreshRejected (re-login needed) or RefreshUnavailable (token service down).
        """
        if self._rejected is not None:
            await self._recheck_after_rejection()
        account = self._account
        if account.access_token and self._is_fresh(account):
            return account.access_token
        if self._clock() < self._store_retry_at and self._still_valid(account, self._invalidated):
            return account.access_token  # type: ignore[return-value]  # the store is failing: no refresh yet
        return await self._refresh(rejected=self._invalidated)

    async def refresh_after_rejection(self, rejected_token: str) -> str:
        """Amazon Q refused `rejected_token`: get a different one, refreshing at most once.

        If another request already replaced that token, its replacement is
        returned without a new refresh.
        """
        if self._rejected is not None:
            await self._recheck_after_rejection()
        for _ in range(2):
            current = self._account.access_token
            if current and current != rejected_token and self._is_fresh(self._account):
                return current
            # A refresh already in flight (started for expiry) may come back with
            # the very token that was just rejected; then one more, aimed at it.
            token = await self._refresh(rejected=rejected_token)
            if token != rejected_token:
                return token
        raise RefreshUnavailable(f"account {self.label!r}: the refreshed token was the rejected one")

    def invalidate(self, token: str) -> None:
        """Forget `token` (if current), so the next access_token() refreshes."""
        if self._account.access_token == token:
            self._account = dataclasses.replace(self._account, expires_at=0.0)
            self._invalidated = token

    # -- hot reload and operator actions ----------------------------------------

    def follow_store(self, stored: Account) -> None:
        """Adopt a newer stored row: a new label, new credentials, a token or login state from elsewhere."""
        if stored.updated_at == self._account.updated_at:
            return
        if stored.access_token is not None and stored.access_token == self._invalidated:
            stored = dataclasses.replace(stored, expires_at=0.0)  # still the token Amazon Q refused
        self._account = stored
        if stored.status is AccountStatus.NEEDS_LOGIN:
            self._mark_rejected(RefreshRejected(self.label, stored.status_detail or "refresh token rejected"))
        else:
            self._rejected = None

    async def mark_needs_login(self, detail: str) -> None:
        """Stop serving until an operator signs in again or a manual refresh succeeds (e.g. suspended)."""
        logger.bind(account=self.label).error(f"account marked as needing login: {detail}")
        await self._store.set_status(self._account.id, AccountStatus.NEEDS_LOGIN, detail)
        self._account = dataclasses.replace(self._account, status=AccountStatus.NEEDS_LOGIN, status_detail=detail)
        self._mark_rejected(RefreshRejected(self.label, detail))

    async def refresh_now(self) -> Account:
        """Refresh at once, even an account marked as needing login (the operator's retry).

        Calls made while one runs share it (one refresh, one result for all: forty clicks are one
        refresh and one lock connection). Raises RefreshRejected (and marks the account) or
        RefreshUnavailable.
        """
        if self._manual_refresh is None:
            task = asyncio.get_running_loop().create_task(self._refresh_now())
            task.add_done_callback(self._manual_refresh_finished)
            self._manual_refresh = task
        return await asyncio.shield(self._manual_refresh)

    def _manual_refresh_finished(self, task: asyncio.Task[Account]) -> None:
        if self._manual_refresh is task:
            self._manual_refresh = None
        if not task.cancelled():
            task.exception()  # mark retrieved: every waiter may have gone away

    async def _refresh_now(self) -> Account:
        async with self._store.refresh_lock(self._account.id):
            stored = await self._store.get(self._account.id)
            if stored is None:
                raise RefreshRejected(self.label, "the account was removed from the store")
            # Naming the current token as rejected: a failure may not fall back to it.
            await self._refresh_locked(stored, rejected=stored.access_token or "")
        self._rejected = None
        return self._account

    # -- internals -----------------------------------------------------------

    def _is_fresh(self, account: Account) -> bool:
        if account.expires_at is None:
            return True  # an operator-supplied token of unknown lifetime: use it until rejected
        return account.expires_at - self._margin > self._clock()

    async def _refresh(self, rejected: str | None) -> str:
        if self._inflight is None:
            task = asyncio.get_running_loop().create_task(self._run_refresh(rejected))
            task.add_done_callback(self._refresh_finished)
            self._inflight = task
        return await asyncio.shield(self._inflight)

    def _refresh_finished(self, task: asyncio.Task[str]) -> None:
        if self._inflight is task:
            self._inflight = None
        if not task.cancelled():
            task.exception()  # mark retrieved: every waiter may have gone away

    def _still_valid(self, account: Account, rejected: str | None) -> bool:
        """Has `account` a token Amazon Q has not refused and that has not expired (however soon it will)?"""
        return bool(
            account.access_token
            and account.access_token != rejected
            and (account.expires_at is None or account.expires_at > self._clock())
        )

    async def _run_refresh(self, rejected: str | None) -> str:
        try:
            async with self._store.refresh_lock(self._account.id):
                token = await self._refresh_holding_lock(rejected)
        except STORE_ERRORS as exc:  # the lock could not be taken: nothing was refreshed
            return self._through_store_outage(exc, rejected)
        if self._store_retry_delay:
            self._store_retry_delay = self._store_retry_at = 0.0
            logger.bind(account=self.label).info("the account store answers again; the token refresh went through")
        return token

    def _through_store_outage(self, error: Exception, rejected: str | None) -> str:
        """The store failed before a refresh could start: serve on a still-valid token, try again later."""
        self._observer.token_refresh(REFRESH_UNAVAILABLE)
        first = not self._store_retry_delay
        self._store_retry_delay = min(max(self._store_retry_delay * 2, STORE_RETRY_DELAY), STORE_RETRY_DELAY_MAX)
        self._store_retry_at = self._clock() + self._store_retry_delay
        account = self._account
        if self._still_valid(account, rejected):
            if first:
                left = (
                    "" if account.expires_at is None else f" (it expires in {account.expires_at - self._clock():.0f}s)"
                )
                logger.bind(account=self.label).warning(
                    f"cannot refresh the access token while the account store fails ({error}); serving with the"
                    f" current token{left} and trying the refresh again with a growing delay"
                )
            return account.access_token  # type: ignore[return-value]
        logger.bind(account=self.label).error(f"the access token has expired and the account store fails: {error}")
        raise RefreshUnavailable(
            f"account {self.label!r}: its access token has expired and cannot be refreshed while the account store"
            " is unavailable"
        ) from None

    async def _refresh_holding_lock(self, rejected: str | None) -> str:
        stored = self._saver.overlay(await self._read_stored())
        if stored is None:
            raise RefreshRejected(self.label, "the account was removed from the store")
        if stored.access_token and stored.access_token != rejected and self._is_fresh(stored):
            if stored.access_token != self._account.access_token:
                logger.info("adopted an access token refreshed by another worker", account=self.label)
                self._observer.token_refresh(REFRESH_ADOPTED)
            self._account = stored
            return stored.access_token
        if stored.status is AccountStatus.NEEDS_LOGIN:
            self._account = stored
            self._mark_rejected(RefreshRejected(self.label, stored.status_detail or "refresh token rejected"))
            raise self._rejected  # type: ignore[misc]
        return await self._refresh_locked(stored, rejected)

    async def _refresh_locked(self, stored: Account, rejected: str | None) -> str:
        try:
            result = await self._refresh_call(stored)
        except RefreshRejected as exc:
            self._observer.token_refresh(REFRESH_REJECTED)
            logger.bind(account=self.label).error(str(exc))
            try:
                await self._store.set_status(stored.id, AccountStatus.NEEDS_LOGIN, exc.detail)
            except STORE_ERRORS as store_error:  # the rejection stands in memory; the store catches up later
                logger.bind(account=self.label).error(f"could not record the rejection in the store: {store_error}")
            self._account = dataclasses.replace(stored, status=AccountStatus.NEEDS_LOGIN, status_detail=exc.detail)
            self._mark_rejected(exc)
            raise
        except RefreshUnavailable as exc:
            self._observer.token_refresh(REFRESH_UNAVAILABLE)
            still_valid = (
                stored.access_token
                and stored.access_token != rejected
                and (stored.expires_at is None or stored.expires_at > self._clock())
            )
            if still_valid:
                # Refreshing early failed, but the old token has not expired: keep serving with it.
                logger.bind(account=self.label).warning(
                    f"token refresh failed, using the current token until it expires: {exc}"
                )
                self._account = stored
                return stored.access_token  # type: ignore[return-value]
            logger.bind(account=self.label).error(f"token refresh failed: {exc}")
            raise
        self._account = await self._saver.save(stored, result)
        self._observer.token_refresh(REFRESH_SUCCESS)
        logger.info(
            "refreshed the access token",
            account=self.label,
            expires_in=int(result.expires_at - self._clock()),
            refresh_token_rotated=result.refresh_token is not None,
        )
        return result.access_token

    async def _read_stored(self) -> Account | None:
        """The account as stored; if the store cannot be read, the copy in memory (and an ERROR line)."""
        try:
            return await self._store.get(self._account.id)
        except STORE_ERRORS as exc:
            logger.bind(account=self.label).error(
                f"could not read the account store ({type(exc).__name__}: {exc}); using the tokens in memory"
            )
            return self._account

    def _mark_rejected(self, error: RefreshRejected) -> None:
        self._rejected = error
        self._rejected_checked_at = self._clock()

    async def _recheck_after_rejection(self) -> None:
        """Raise the rejection again, unless the operator has since stored new credentials."""
        assert self._rejected is not None
        if self._clock() - self._rejected_checked_at < _REJECTED_RECHECK_INTERVAL:
            raise self._rejected
        self._rejected_checked_at = self._clock()
        try:
            stored = await self._store.get(self._account.id)
        except STORE_ERRORS:
            raise self._rejected from None  # nothing new can be learnt while the store fails
        if stored is None or stored.status is AccountStatus.NEEDS_LOGIN:
            raise self._rejected
        logger.info("account has new credentials; using it again", account=self.label)
        self._rejected = None
        self._account = stored
