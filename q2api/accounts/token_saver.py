"""Refreshed tokens reach the store, even while the store is failing.

A refresh that rotates the refresh token retires the old one at the token
service at once. If the store then cannot save the new pair (the SQLite file
locked by another process past the busy timeout, a full disk), dropping the
pair would leave the account with a refresh token nobody accepts any more. So
the pair is kept in memory and served from there, the write is retried in the
background with a growing delay, and every failed attempt is an ERROR line
(without the tokens) until the store takes it.

A late write is conditional on the row's token generation: if an operator
stored a new login meanwhile, that login wins and the unsaved pair is dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses

from loguru import logger
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from q2api.accounts.records import Account, AccountStatus
from q2api.accounts.refresh import RefreshedToken
from q2api.accounts.store_protocol import CredentialStore
from q2api.store.errors import STORE_ERRORS


@dataclasses.dataclass(frozen=True)
class _Unsaved:
    tokens: RefreshedToken
    generation: int  # the stored row's token generation these tokens replace


def with_tokens(account: Account, tokens: RefreshedToken) -> Account:
    """`account` as it is once `tokens` are in place (a None refresh token / ARN keeps the old one)."""
    return dataclasses.replace(
        account,
        access_token=tokens.access_token,
        expires_at=tokens.expires_at,
        refresh_token=tokens.refresh_token or account.refresh_token,
        profile_arn=tokens.profile_arn or account.profile_arn,
        status=AccountStatus.ACTIVE,
        status_detail=None,
    )


class TokenSaver:
    """Saves one account's refresh results; holds and retries those the store refused."""

    def __init__(
        self,
        store: CredentialStore,
        account_id: str,
        label: str,
        *,
        first_retry_delay: float = 1.0,
        max_retry_delay: float = 60.0,
    ) -> None:
        self._store = store
        self._account_id = account_id
        self._label = label
        self._first_delay = first_retry_delay
        self._max_delay = max_retry_delay
        self._unsaved: _Unsaved | None = None
        self._retrying: asyncio.Task[None] | None = None
        # One write at a time, so a late retry and a new refresh never cross.
        self._write_lock = asyncio.Lock()
        self._written_generation = -1  # the row's generation after the last background write

    @property
    def has_unsaved(self) -> bool:
        return self._unsaved is not None

    def overlay(self, stored: Account | None) -> Account | None:
        """`stored` with the tokens the store has not taken yet, unless the row has changed since."""
        unsaved = self._unsaved
        if unsaved is None or stored is None:
            return stored
        if stored.token_generation != unsaved.generation:
            return stored  # saved by now, or replaced by a new login: the store is right
        return with_tokens(stored, unsaved.tokens)

    async def save(self, stored: Account, tokens: RefreshedToken) -> Account:
        """Store `tokens` over `stored`; the account as it now is, in the store or in memory."""
        async with self._write_lock:
            try:
                updated = await self._write(tokens, None)
            except STORE_ERRORS as exc:
                generation = max(stored.token_generation, self._written_generation)
                self._unsaved = _Unsaved(tokens, generation)
                logger.bind(account=self._label).error(
                    f"could not save the refreshed tokens ({type(exc).__name__}: {exc}); serving with them from"
                    " memory and retrying the write in the background — fix the data directory: a restart before"
                    " the write succeeds loses the rotated refresh token"
                )
                self._retry_in_background()
                return with_tokens(stored, tokens)
            self._unsaved = None  # anything held back is older than what was just saved
            return updated or with_tokens(stored, tokens)

    def _retry_in_background(self) -> None:
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.get_running_loop().create_task(self._retry())

    async def _retry(self) -> None:
        def log_failure(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            logger.bind(account=self._label, attempt=state.attempt_number).error(
                f"still cannot save the refreshed tokens ({type(error).__name__}: {error}); retrying"
            )

        await asyncio.sleep(self._first_delay)
        async for attempt in AsyncRetrying(
            wait=wait_exponential(multiplier=self._first_delay, max=self._max_delay),
            retry=retry_if_exception_type(STORE_ERRORS),
            before_sleep=log_failure,
        ):
            with attempt:
                await self._write_unsaved()

    async def _write_unsaved(self) -> None:
        async with self._write_lock:
            unsaved = self._unsaved
            if unsaved is None:
                return  # a newer refresh was saved meanwhile
            updated = await self._write(unsaved.tokens, unsaved.generation)
            self._unsaved = None
            if updated is not None:
                self._written_generation = updated.token_generation
        if updated is None:
            logger.bind(account=self._label).warning(
                "the account changed in the store while its refreshed tokens waited to be saved; the store's wins"
            )
        else:
            logger.bind(account=self._label).info("saved the refreshed tokens: the store works again")

    async def _write(self, tokens: RefreshedToken, if_generation: int | None) -> Account | None:
        return await self._store.save_tokens(
            self._account_id,
            access_token=tokens.access_token,
            expires_at=tokens.expires_at,
            refresh_token=tokens.refresh_token,
            profile_arn=tokens.profile_arn,
            if_generation=if_generation,
        )
