"""The account pool: which account serves the next request, and which ones should rest.

Health lives in memory (a throttle is a per-request event, and the store is
written only when tokens or accounts change). Cool-downs are shared all the
same: each one (and its end, when the upstream serves the account again) is
queued here and written to the store by the reloader's next tick, which also
brings in the cool-downs other workers and replicas recorded. The one durable
state, "needs a new login", is kept by the token manager in the store. The pool follows the
store (`sync`): accounts added, changed, disabled or removed elsewhere join or
leave it; a request that already holds an account's token manager keeps it.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import time
from collections.abc import Callable, Collection, Iterable, Sequence

import aiohttp
from loguru import logger

from q2api.accounts.records import Account, AccountRest, EnvAccount
from q2api.accounts.refresh import RefreshEndpoints, refresh_access_token
from q2api.accounts.stats import StatsRecorder
from q2api.accounts.store_protocol import CredentialStore
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.errors import FailureKind
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver

# How long an account rests after each account-scoped failure, unless the upstream said otherwise.
THROTTLE_COOLDOWN = 30.0
THROTTLE_COOLDOWN_MAX = 300.0
QUOTA_COOLDOWN = 3600.0  # a quota: look again hourly (a plan upgrade takes effect at once)
ACCESS_DENIED_COOLDOWN = 1800.0
FAILURE_COOLDOWN = 300.0  # after `failure_limit` consecutive failures
# How long an account is not chosen for a model Amazon Q refused for it (INVALID_MODEL_ID) though its
# catalogue lists it (9router#2882, #2308 report exactly that mismatch): its catalogue is read again at once,
# and a re-read that still lists the model is not believed before this passes.
MODEL_REFUSAL_SECONDS = 1800.0
# How many of its own shared rests per account a pool remembers (see AccountPool._own_rest_ends).
_OWN_RESTS_KEPT = 8
# Failures that are the request's own fault, not the account's or the upstream's.
_CLIENT_FAULTS = frozenset({FailureKind.BAD_REQUEST, FailureKind.CONTEXT_OVERFLOW})


class AccountHealth(enum.Enum):
    READY = "ready"
    THROTTLED = "throttled"
    QUOTA_EXHAUSTED = "quota_exhausted"
    ACCESS_DENIED = "access_denied"
    FAILING = "failing"  # too many consecutive failures: resting
    NEEDS_LOGIN = "needs_login"


# The health of an account a request still goes to (resting after transient failures: Amazon Q decides).
_SERVING_HEALTH = frozenset({AccountHealth.READY.value, AccountHealth.THROTTLED.value, AccountHealth.FAILING.value})

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
    consecutive_failures: int = 0
    last_picked: float = 0.0
    # Lower-case ids of the models the account's catalogue lists; None until one is known.
    models: frozenset[str] | None = None
    # Models Amazon Q refused for this account (INVALID_MODEL_ID) though its catalogue lists them: lower-case
    # id → monotonic time the refusal is forgotten (a catalogue that still lists it is not believed until then).
    refused_models: dict[str, float] = dataclasses.field(default_factory=dict)

    def serves(self, model: str | None, now: float = 0.0) -> bool:
        if model is None:
            return True
        wanted = model.lower()
        if self.refused_models and self.refused_models.get(wanted, 0.0) > now:
            return False
        return self.models is None or wanted in self.models


@dataclasses.dataclass(frozen=True)
class AccountHealthView:
    account_id: str
    label: str
    health: str
    resting_for: float  # seconds left in the cool-down, 0 when ready


ManagerFactory = Callable[[Account], TokenManager]


class AccountPool:
    def __init__(
        self,
        managers: Sequence[TokenManager],
        *,
        clock: Callable[[], float] = time.monotonic,
        factory: ManagerFactory | None = None,
        failure_limit: int = 0,
        stats: StatsRecorder | None = None,
    ) -> None:
        """`factory` makes the token manager of an account `sync` adds; `failure_limit`
        consecutive failures rest an account for FAILURE_COOLDOWN (0 = never)."""
        self._slots = {manager.account_id: _Slot(manager) for manager in managers}
        self._clock = clock
        self._factory = factory
        self.failure_limit = failure_limit
        self.stats = stats or StatsRecorder()
        # Called with the account id after each request an account served (credits are re-read then).
        self.on_served: Callable[[str], None] | None = None
        # Called with the account id when `sync` adds an account (its catalogue is read then).
        self.on_joined: Callable[[str], None] | None = None
        # Called with the account id when Amazon Q refused a model its catalogue lists (read it again).
        self.on_model_refused: Callable[[str], None] | None = None
        self._rests_to_share: dict[str, AccountRest | None] = {}  # None: the rest ended early
        # The ends (wall clock) of the rests this pool shared, by account: the store keeps the longest
        # rest it was given, so an earlier, longer one of this pool's own may still be there after a
        # shorter, newer one (a throttle with Retry-After after a failure rest). Never news to follow.
        self._own_rest_ends: dict[str, list[float]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def managers(self) -> list[TokenManager]:
        return [slot.manager for slot in self._slots.values()]

    def manager(self, account_id: str) -> TokenManager | None:
        slot = self._slots.get(account_id)
        return slot.manager if slot is not None else None

    def make_manager(self, account: Account) -> TokenManager:
        """A token manager for `account` outside the pool (e.g. to check a disabled account's login)."""
        if self._factory is None:
            raise RuntimeError("this pool was built without a token manager factory")
        return self._factory(account)

    def sync(self, accounts: Sequence[Account]) -> None:
        """Follow the store: serve exactly its enabled accounts, with their current rows.

        A removed or disabled account leaves the pool at once, so no new request
        or retry picks it; one already picked finishes with it.
        """
        wanted = {account.id: account for account in accounts if account.enabled}
        for account_id in [account_id for account_id in self._slots if account_id not in wanted]:
            gone = self._slots.pop(account_id)
            logger.info("account left the pool", account=gone.manager.label, account_id=account_id)
        for account_id, account in wanted.items():
            current = self._slots.get(account_id)
            if current is not None:
                current.manager.follow_store(account)
            elif self._factory is not None:
                self._slots[account_id] = _Slot(self._factory(account))
                logger.info("account joined the pool", account=account.label, account_id=account_id)
                if self.on_joined is not None:
                    self.on_joined(account_id)

    def pick(self, exclude: Collection[str] = (), model: str | None = None) -> TokenManager | None:
        """The least recently used ready account not in `exclude` whose catalogue has `model`.

        When none is ready, the one whose cool-down ends first (the upstream,
        not the gateway, decides whether it still refuses); accounts that need
        a new login come last, so their error reaches the operator. None only
        when every account is excluded or none may use `model`.
        """
        now = self._clock()
        candidates = [
            slot for account_id, slot in self._slots.items() if account_id not in exclude and slot.serves(model, now)
        ]
        if not candidates:
            return None
        chosen = min(candidates, key=lambda slot: self._preference(slot, now))
        chosen.last_picked = now
        return chosen.manager

    def has_alternative(self, exclude: Collection[str], model: str | None = None) -> bool:
        """Is there a usable account outside `exclude` (worth switching to at once)?"""
        now = self._clock()
        return any(
            account_id not in exclude and slot.serves(model, now) and _health(slot, now) is AccountHealth.READY
            for account_id, slot in self._slots.items()
        )

    def unfit(self, account_id: str, model: str | None = None) -> str | None:
        """Why `account_id` should not take a request for `model` now, else None: "disabled" (not in the
        pool: disabled or removed), "needs_login", "resting" (a cool-down runs), "model" (its catalogue
        lacks it). Session affinity moves a conversation off its account for these."""
        slot = self._slots.get(account_id)
        if slot is None:
            return "disabled"
        now = self._clock()
        if not slot.serves(model, now):
            return "model"
        health = _health(slot, now)
        if health is AccountHealth.NEEDS_LOGIN:
            return "needs_login"
        return None if health is AccountHealth.READY else "resting"

    def model_refused(self, account_id: str, model: str) -> None:
        """Amazon Q answered INVALID_MODEL_ID for `model` on this account: it is not chosen for `model` for
        MODEL_REFUSAL_SECONDS, and its catalogue is read again (`on_model_refused`)."""
        slot = self._slots.get(account_id)
        if slot is None:
            return
        slot.refused_models[model.lower()] = self._clock() + MODEL_REFUSAL_SECONDS
        if self.on_model_refused is not None:
            self.on_model_refused(account_id)

    def set_models(self, account_id: str, model_ids: Iterable[str] | None) -> None:
        """The models the account may use from now on (None: unknown, so any)."""
        slot = self._slots.get(account_id)
        if slot is not None:
            slot.models = None if model_ids is None else frozenset(model_id.lower() for model_id in model_ids)

    def rest_until_reset(self, account_id: str, seconds: float) -> None:
        """The account's credits are used up: it rests until they reset, before a request fails on it."""
        slot = self._slots.get(account_id)
        if slot is None:
            return
        until = self._clock() + max(seconds, 0.0)
        if slot.rest_reason is AccountHealth.QUOTA_EXHAUSTED and slot.resting_until >= until - 60:
            return  # already resting for this (a re-read of the same credits says nothing new)
        slot.rest_reason = AccountHealth.QUOTA_EXHAUSTED
        slot.resting_until = max(slot.resting_until, until)
        # Shared like every cool-down: unshared, the next reload tick would read no rest for the
        # account in the store and end this one as "served by another worker".
        self._rests_to_share[account_id] = AccountRest(
            time.time() + (slot.resting_until - self._clock()), AccountHealth.QUOTA_EXHAUSTED.value
        )
        logger.bind(account=slot.manager.label, health=slot.rest_reason.value).warning(
            f"account rests for {seconds:g}s: its credits are used up until they reset"
        )

    def report_success(self, account_id: str) -> None:
        self.stats.record(account_id)
        slot = self._slots.get(account_id)
        if slot is not None:
            if slot.resting_until:
                self._rests_to_share[account_id] = None
            slot.resting_until = 0.0
            slot.consecutive_throttles = 0
            slot.consecutive_failures = 0
            if self.on_served is not None:
                self.on_served(account_id)

    def report_failure(
        self, account_id: str, kind: FailureKind | None, retry_after: float | None = None, detail: str | None = None
    ) -> None:
        """An attempt with `account_id` failed: `kind` for an error reply, None for a failure to reach
        Amazon Q or its token service. `detail` (no secret in it) becomes the account's last error."""
        client_fault = kind in _CLIENT_FAULTS
        self.stats.record(account_id, None if client_fault else detail or (kind.value if kind else "failed"))
        slot = self._slots.get(account_id)
        if slot is None or client_fault:
            return
        slot.consecutive_failures += 1
        health = _HEALTH_BY_FAILURE.get(kind) if kind is not None else None
        if health is None:
            if self.failure_limit and slot.consecutive_failures >= self.failure_limit:
                self._rest(slot, AccountHealth.FAILING, FAILURE_COOLDOWN)
            return
        if kind is FailureKind.THROTTLED:
            slot.consecutive_throttles += 1
            rest = retry_after or min(THROTTLE_COOLDOWN * slot.consecutive_throttles, THROTTLE_COOLDOWN_MAX)
        elif health is AccountHealth.QUOTA_EXHAUSTED:
            rest = QUOTA_COOLDOWN
        else:
            rest = ACCESS_DENIED_COOLDOWN
        self._rest(slot, health, rest)

    def take_rests(self) -> dict[str, AccountRest | None]:
        """The cool-downs begun (an AccountRest) or ended (None) here since the last call, to share."""
        rests, self._rests_to_share = self._rests_to_share, {}
        wall_now = time.time()
        for account_id, rest in rests.items():
            ends = [end for end in self._own_rest_ends.get(account_id, ()) if end > wall_now]
            if rest is not None:
                ends.append(rest.until)
            self._own_rest_ends[account_id] = ends[-_OWN_RESTS_KEPT:]
        return rests

    def requeue_rest(self, account_id: str, rest: AccountRest | None) -> None:
        """Put back a cool-down whose sharing failed (unless a newer one for the account is queued)."""
        self._rests_to_share.setdefault(account_id, rest)

    def adopt_rests(self, rests: dict[str, AccountRest], wall_clock: Callable[[], float] = time.time) -> None:
        """Follow the store's cool-downs (`rests`, by account id), which hold this pool's own ones too.

        Call right after this pool's queued rests were written: then a resting
        account missing from `rests` was served again elsewhere and is ready.
        """
        now, wall_now = self._clock(), wall_clock()
        for account_id, slot in self._slots.items():
            if account_id in self._rests_to_share or (slot.resting_until <= now and account_id not in rests):
                continue  # a change of this pool's not yet shared, or nothing to follow
            rest = rests.get(account_id)
            if rest is None:
                slot.resting_until = 0.0
                logger.bind(account=slot.manager.label).info(
                    "account rests no more (served again by another worker or replica)"
                )
                continue
            if any(abs(rest.until - end) < 1.0 for end in self._own_rest_ends.get(account_id, ())):
                continue  # this pool's own rest, superseded here by a newer one
            until = now + (rest.until - wall_now)
            if until > slot.resting_until + 1.0:
                slot.rest_reason = AccountHealth(rest.reason)
                slot.resting_until = until
                # Recorded in the store by another worker or replica — or by this one before a restart.
                logger.bind(account=slot.manager.label, health=rest.reason).info(
                    f"account rests for {until - now:.0f}s (a cool-down recorded in the account store)"
                )

    def _rest(self, slot: _Slot, health: AccountHealth, seconds: float) -> None:
        slot.rest_reason = health
        slot.resting_until = self._clock() + seconds
        self._rests_to_share[slot.manager.account_id] = AccountRest(time.time() + seconds, health.value)
        logger.bind(account=slot.manager.label, health=health.value).warning(f"account rests for {seconds:g}s")

    def health(self) -> list[AccountHealthView]:
        now = self._clock()
        views = []
        for slot in self._slots.values():
            health = _health(slot, now)
            resting = max(slot.resting_until - now, 0.0) if health is not AccountHealth.READY else 0.0
            views.append(AccountHealthView(slot.manager.account_id, slot.manager.label, health.value, resting))
        return views

    def unready_reason(self) -> str | None:
        """None when a request would be served now, else why none would.

        A request goes to a ready account, else to the account whose cool-down ends first
        (`pick`): an account resting after throttling or failures still serves it, and Amazon Q
        decides. One whose login is dead, whose credits are used up or whose access was denied
        does not: it would only answer the error that rested it.
        """
        views = self.health()
        if not views:
            return "no enabled Amazon Q account"
        if any(view.health in _SERVING_HEALTH for view in views):
            return None
        counts = collections.Counter(view.health for view in views)
        return "no account can serve now: " + ", ".join(f"{count} {health}" for health, count in sorted(counts.items()))

    def resting_note(self) -> str | None:
        """For a pool that serves (`unready_reason` None) with no account ready: which ones rest."""
        views = self.health()
        if not views or any(view.health == AccountHealth.READY.value for view in views):
            return None
        counts = collections.Counter(view.health for view in views)
        return "serving on resting accounts: " + ", ".join(
            f"{count} {health}" for health, count in sorted(counts.items())
        )

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


async def build_account_pool(
    store: CredentialStore,
    session: aiohttp.ClientSession,
    *,
    endpoints: RefreshEndpoints,
    seed: EnvAccount | None = None,
    failure_limit: int = 0,
    observer: UpstreamObserver = NO_OBSERVER,
    proxies: AccountProxies | None = None,
) -> AccountPool:
    """Seed the environment account, then one token manager per enabled stored account.

    Call once at start-up. `proxies`: the sessions of accounts with a proxy of their own (their
    refreshes go through it).
    """
    if seed is not None:
        await store.seed_from_env(seed)
    refresh = functools.partial(refresh_access_token, session, endpoints=endpoints, proxies=proxies)

    def factory(account: Account) -> TokenManager:
        return TokenManager(account, store, refresh, observer=observer)

    managers = [factory(account) for account in await store.accounts() if account.enabled]
    # No account is said once, by start-up's readiness line (q2api.server.readiness), with what to do.
    return AccountPool(managers, factory=factory, failure_limit=failure_limit)
