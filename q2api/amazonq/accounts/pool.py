"""The account pool: which account serves the next request, and which ones should rest.

Health lives in memory (a throttle is a per-request event, and the store is
written only when tokens or accounts change). The one durable state, "needs a
new login", is kept by the token manager in the store.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import time
from collections.abc import Callable, Collection, Sequence

import aiohttp
from loguru import logger

from q2api.amazonq.accounts.refresh import RefreshEndpoints, refresh_access_token
from q2api.amazonq.accounts.store import AccountStatus, AccountStore, EnvAccount
from q2api.amazonq.accounts.tokens import TokenManager
from q2api.amazonq.errors import FailureKind
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver

# How long an account rests after each account-scoped failure, unless the upstream said otherwise.
THROTTLE_COOLDOWN = 30.0
THROTTLE_COOLDOWN_MAX = 300.0
QUOTA_COOLDOWN = 3600.0  # a quota: look again hourly (a plan upgrade takes effect at once)
ACCESS_DENIED_COOLDOWN = 1800.0


class AccountHealth(enum.Enum):
    READY = "ready"
    THROTTLED = "throttled"
    QUOTA_EXHAUSTED = "quota_exhausted"
    ACCESS_DENIED = "access_denied"
    NEEDS_LOGIN = "needs_login"


_HEALTH_BY_FAILURE = {
    FailureKind.THROTTLED: AccountHealth.THROTTLED,
    FailureKind.MONTHLY_QUOTA: AccountHealth.QUOTA_EXHAUSTED,
    FailureKind.OTHER_QUOTA: AccountHealth.QUOTA_EXHAUSTED,
    FailureKind.ACCESS_DENIED: AccountHealth.ACCESS_DENIED,
}


@dataclasses.dataclass
class _Slot:
    manager: TokenManager
    resting_until: float = 0.0  # monotonic time the last account-scoped failure's cool-down ends
    rest_reason: AccountHealth = AccountHealth.READY  # the health that failure gave it
    consecutive_throttles: int = 0
    last_picked: float = 0.0


@dataclasses.dataclass(frozen=True)
class AccountHealthView:
    account_id: str
    label: str
    health: str
    resting_for: float  # seconds left in the cool-down, 0 when ready


class AccountPool:
    def __init__(self, managers: Sequence[TokenManager], *, clock: Callable[[], float] = time.monotonic) -> None:
        self._slots = {manager.account_id: _Slot(manager) for manager in managers}
        self._clock = clock

    def __len__(self) -> int:
        return len(self._slots)

    def managers(self) -> list[TokenManager]:
        return [slot.manager for slot in self._slots.values()]

    def pick(self, exclude: Collection[str] = ()) -> TokenManager | None:
        """The least recently used ready account not in `exclude`.

        When none is ready, the one whose cool-down ends first (the upstream,
        not the gateway, decides whether it still refuses); accounts that need
        a new login come last, so their error reaches the operator. None only
        when every account is excluded.
        """
        now = self._clock()
        candidates = [slot for account_id, slot in self._slots.items() if account_id not in exclude]
        if not candidates:
            return None
        chosen = min(candidates, key=lambda slot: self._preference(slot, now))
        chosen.last_picked = now
        return chosen.manager

    def has_alternative(self, exclude: Collection[str]) -> bool:
        """Is there a usable account outside `exclude` (worth switching to at once)?"""
        now = self._clock()
        return any(
            account_id not in exclude and _health(slot, now) is AccountHealth.READY
            for account_id, slot in self._slots.items()
        )

    def report_success(self, account_id: str) -> None:
        slot = self._slots.get(account_id)
        if slot is not None:
            slot.resting_until = 0.0
            slot.consecutive_throttles = 0

    def report_failure(self, account_id: str, kind: FailureKind, retry_after: float | None = None) -> None:
        slot = self._slots.get(account_id)
        health = _HEALTH_BY_FAILURE.get(kind)
        if slot is None or health is None:
            return
        if kind is FailureKind.THROTTLED:
            slot.consecutive_throttles += 1
            rest = retry_after or min(THROTTLE_COOLDOWN * slot.consecutive_throttles, THROTTLE_COOLDOWN_MAX)
        elif health is AccountHealth.QUOTA_EXHAUSTED:
            rest = QUOTA_COOLDOWN
        else:
            rest = ACCESS_DENIED_COOLDOWN
        slot.rest_reason = health
        slot.resting_until = self._clock() + rest
        logger.bind(account=slot.manager.label, health=health.value).warning(f"account rests for {rest:g}s")

    def health(self) -> list[AccountHealthView]:
        now = self._clock()
        views = []
        for slot in self._slots.values():
            health = _health(slot, now)
            resting = max(slot.resting_until - now, 0.0) if health is not AccountHealth.READY else 0.0
            views.append(AccountHealthView(slot.manager.account_id, slot.manager.label, health.value, resting))
        return views

    @staticmethod
    def _preference(slot: _Slot, now: float) -> tuple[int, float]:
        health = _health(slot, now)
        if health is AccountHealth.NEEDS_LOGIN:
            return (2, slot.last_picked)
        if health is AccountHealth.READY:
            return (0, slot.last_picked)
        return (1, slot.resting_until)


def _health(slot: _Slot, now: float) -> AccountHealth:
    """Derived, never stored: a cool-down simply runs out."""
    if slot.manager.needs_login:
        return AccountHealth.NEEDS_LOGIN
    if slot.resting_until > now:
        return slot.rest_reason
    return AccountHealth.READY


def build_account_pool(
    store: AccountStore,
    session: aiohttp.ClientSession,
    *,
    endpoints: RefreshEndpoints,
    seed: EnvAccount | None = None,
    observer: UpstreamObserver = NO_OBSERVER,
) -> AccountPool:
    """Seed the environment account, then one token manager per enabled stored account.

    Call once at start-up (it does blocking SQLite I/O, which is brief).
    """
    if seed is not None:
        store.seed_from_env(seed)
    refresh = functools.partial(refresh_access_token, session, endpoints=endpoints)
    managers = [
        TokenManager(account, store, refresh, observer=observer)
        for account in store.accounts()
        if account.status is not AccountStatus.DISABLED
    ]
    if not managers:
        logger.warning(
            "no Amazon Q account is configured: set AMAZONQ_REFRESH_TOKEN (and the client id/secret for IdC) "
            "or run `q2api accounts add`"
        )
    return AccountPool(managers)
