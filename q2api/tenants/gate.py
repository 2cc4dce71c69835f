"""The one check every front door's request passes before any upstream call, for a key kept in the store:
still valid (else 401), allowed the model (else 403 naming its models), and within its rates,
concurrency and budgets (else 429 with `retry-after` and Anthropic's rate-limit headers).

What a key may do (its models, expiry, revocation) is part of its record, checked whenever the record
is read, and never skipped: a request whose record cannot be read is not served at all (the server's
tenancy answers it 503). Only the counters (rates, tokens, concurrency, budgets) live elsewhere (the
store's tables or Redis); while they cannot be used, a request is admitted without them or refused
(503, `retry-after`), as `Q2API_LIMITS_WHEN_STORE_DOWN` says, and the log says so once a minute
(outage.py), the observer once a request.

What the request really used (its tokens, its credits) is counted once it is over (`settle`), and
its place in flight given back. A place in flight is held only while its request runs: the gate renews
the places of its running requests every LEASE_RENEW_SECONDS, and one nobody renews (its worker died)
expires LEASE_SECONDS after (counters.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import math
import time
from collections.abc import Callable
from typing import Literal, Protocol

from q2api.anthropic.errors import AnthropicError
from q2api.tenants.counters import LEASE_RENEW_SECONDS, Addition, Admitted, Counters, Refused
from q2api.tenants.keys import KeyRecord, models_text
from q2api.tenants.lease_renewal import LeaseRenewal
from q2api.tenants.outage import Outage
from q2api.tenants.windows import (
    CREDITS_DAY,
    CREDITS_MONTH,
    REQUESTS,
    TOKENS,
    Window,
    budget_windows,
    minute,
    windows_for,
)

# Bad keys are told so without `x-should-retry`-style hints: retrying will not help.
_NO_RETRY = {"x-should-retry": "false"}
COUNTERS_DOWN_RETRY_SECONDS = 2  # the retry-after of a request refused while the counters are down
# A place in flight is renewed this long at most, whatever becomes of its request: a request whose end
# was never settled (a bug) must not hold its key's place for ever.
LEASE_MAX_SECONDS = 6 * 3600.0
# How long an admission refused for its key's concurrency waits for a place this process is giving back.
GIVE_BACK_WAIT_SECONDS = 2.0
WhenStoreDown = Literal["admit", "refuse"]


class LimitsUnchecked(Exception):
    """Q2API_LIMITS_WHEN_STORE_DOWN=refuse, and the key's counters cannot be used: its door answers 503
    with `retry-after` (COUNTERS_DOWN_RETRY_SECONDS), as for a store that cannot be read."""

    def __init__(self, key_label: str) -> None:
        super().__init__(f"the limits of the client key {key_label!r} cannot be checked now; try again shortly")


class GateObserver(Protocol):
    """Told of every request the counters could not hold (the server's /metrics)."""

    def limits_unchecked(self, key_label: str, decision: str) -> None:
        """A request of `key_label` whose limits could not be checked: `admitted` or `refused`."""
        ...

    def usage_uncounted(self, key_label: str) -> None:
        """A finished request of `key_label` whose use could not be counted (nor its place given back)."""
        ...


class _Unobserved:
    def limits_unchecked(self, key_label: str, decision: str) -> None:
        return None

    def usage_uncounted(self, key_label: str) -> None:
        return None


@dataclasses.dataclass(slots=True)
class Admission:
    """A request a store key was admitted for: what it was counted as, to be settled when it ends."""

    key: KeyRecord
    at: float  # epoch seconds of the admission
    lease: str | None
    tokens_counted: int  # the input estimate counted in the tokens window (0: the key has no tpm)
    headers: dict[str, str]  # the rate-limit headers of the reply
    settled: bool = False


def _reset_time(end: float) -> str:
    moment = datetime.datetime.fromtimestamp(end, tz=datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def rate_headers(windows: list[Window], used: dict[str, float]) -> dict[str, str]:
    """Anthropic's rate-limit headers (what Claude Code and the SDKs read) for the key's rates."""
    headers: dict[str, str] = {}
    for window in windows:
        kind = {REQUESTS: "requests", TOKENS: "tokens"}.get(window.name)
        if kind is None:
            continue
        headers[f"anthropic-ratelimit-{kind}-limit"] = str(int(window.limit))
        headers[f"anthropic-ratelimit-{kind}-remaining"] = str(max(int(window.limit - used.get(window.name, 0)), 0))
        headers[f"anthropic-ratelimit-{kind}-reset"] = _reset_time(window.end)
    return headers


def check_standing(key: KeyRecord, now: float) -> None:
    """401 for a revoked or expired key."""
    if key.revoked_at is not None:
        raise AnthropicError(401, f"the client key {key.label!r} was revoked", headers=_NO_RETRY)
    if key.expired(now):
        raise AnthropicError(
            401, f"the client key {key.label!r} expired on {_reset_time(key.limits.expires_at or 0)}", headers=_NO_RETRY
        )


def check_model(key: KeyRecord, model: str) -> None:
    """403 (the door's permission error) for a model outside the key's list, naming the ones it may use."""
    allowed = key.limits.models
    if allowed is not None and model not in allowed:
        raise AnthropicError(
            403, f"the client key {key.label!r} may not use the model {model!r}; it may use: {models_text(allowed)}"
        )


def _refusal(key: KeyRecord, refused: Refused) -> AnthropicError:
    retry_after = max(math.ceil(refused.retry_after), 1)
    headers = {"retry-after": str(retry_after)}
    window = refused.window
    if window is None:
        what = f"its {key.limits.max_concurrent} concurrent requests are all in flight"
    elif window.name == REQUESTS:
        what = f"its limit of {int(window.limit)} requests a minute is reached"
    elif window.name == TOKENS:
        what = f"its limit of {int(window.limit)} tokens a minute is reached ({int(refused.used)} used)"
    elif window.name == CREDITS_DAY:
        what = f"its budget of {window.limit:g} credits a day is spent ({refused.used:.2f} used)"
    else:
        what = f"its budget of {window.limit:g} credits a month is spent ({refused.used:.2f} used)"
    if window is not None and window.name in (REQUESTS, TOKENS):
        headers.update(rate_headers([window], {window.name: refused.used}))
    return AnthropicError(429, f"the client key {key.label!r} is over its limits: {what}", headers=headers)


class LimitGate:
    def __init__(
        self,
        counters: Counters,
        clock: Callable[[], float] = time.time,
        *,
        when_down: WhenStoreDown = "admit",
        observer: GateObserver | None = None,
    ) -> None:
        self.counters = counters
        self._clock = clock
        self._when_down = when_down
        self._observer = observer or _Unobserved()
        meanwhile = "served without their limits" if when_down == "admit" else "refused (503)"
        self.outage = Outage(
            "the client keys' counters",
            f"requests of store keys are {meanwhile} while it lasts (Q2API_LIMITS_WHEN_STORE_DOWN={when_down}), "
            "their models, expiry and revocation still checked",
        )
        # The places in flight of this process's running requests, renewed while they run.
        self._held = LeaseRenewal(
            self.counters.renew,
            lambda exc: self.outage.failed(exc, "with a place in flight not renewed"),
            max_age=LEASE_MAX_SECONDS,
        )
        # The places this process is giving back, by key id: settles of requests that just ended.
        self._giving_back: dict[str, set[asyncio.Task[None]]] = {}

    def start(self) -> None:
        """Renew the places in flight of the running requests, every LEASE_RENEW_SECONDS, until `close`."""
        self._held.start(LEASE_RENEW_SECONDS)

    async def close(self) -> None:
        await self._held.close()

    async def renew_leases(self) -> None:
        """Hold the places of the running requests LEASE_SECONDS more (a failure is left to the next round:
        a place that expires meanwhile only lets the key one more request in)."""
        await self._held.renew_all()

    async def admit(self, key: KeyRecord, model: str, input_tokens: int) -> Admission:
        """Admit one request of `key` (raises the AnthropicError to answer it with)."""
        now = self._clock()
        # The record's own rules first, whatever becomes of the counters below.
        check_standing(key, now)
        check_model(key, model)
        windows = windows_for(key.limits, now, input_tokens)
        if not windows and key.limits.max_concurrent is None:
            return Admission(key, now, None, 0, {})
        outcome = await self._count(key, windows, now)
        if outcome is None:
            return Admission(key, now, None, 0, {})
        if isinstance(outcome, Refused) and outcome.window is None and await self._given_back(key.id):
            # A request of this key ended here a moment ago and its place is on its way back: a client
            # that sends its next turn as soon as the last one ends is not refused for its own.
            outcome = await self._count(key, windows, now)
            if outcome is None:
                return Admission(key, now, None, 0, {})
        if isinstance(outcome, Refused):
            raise _refusal(key, outcome)
        assert isinstance(outcome, Admitted)
        counted = next((int(window.cost) for window in windows if window.name == TOKENS), 0)
        if outcome.lease is not None:
            self._held.hold(outcome.lease, key.id)
        return Admission(key, now, outcome.lease, counted, rate_headers(windows, outcome.used))

    async def _count(self, key: KeyRecord, windows: list[Window], now: float) -> Admitted | Refused | None:
        """The counters' verdict; None when they are down and Q2API_LIMITS_WHEN_STORE_DOWN admits unchecked."""
        try:
            outcome = await self.counters.admit(key.id, windows, key.limits.max_concurrent, now)
        except Exception as exc:  # the counters' store (or Redis) is down: Q2API_LIMITS_WHEN_STORE_DOWN says
            self.outage.failed(exc, "admitted unchecked" if self._when_down == "admit" else "refused")
            if self._when_down == "refuse":
                self._observer.limits_unchecked(key.label, "refused")
                raise LimitsUnchecked(key.label) from None
            self._observer.limits_unchecked(key.label, "admitted")
            return None
        self.outage.answered()
        return outcome

    async def _given_back(self, key_id: str) -> bool:
        """Wait (briefly) for the places this process is giving back for `key_id`; whether there were any."""
        pending = self._giving_back.get(key_id)
        if not pending:
            return False
        await asyncio.wait(set(pending), timeout=GIVE_BACK_WAIT_SECONDS)
        return True

    def settle_soon(self, admission: Admission, tokens: int, credits: float) -> asyncio.Task[None]:
        """`settle` as a task, known at once to this process's next admissions of the key (`_given_back`)."""
        task = asyncio.get_running_loop().create_task(self.settle(admission, tokens, credits))
        if admission.lease is not None:
            key_id = admission.key.id
            pending = self._giving_back.setdefault(key_id, set())
            pending.add(task)

            def given_back(done: asyncio.Task[None]) -> None:
                pending.discard(done)
                if not pending and self._giving_back.get(key_id) is pending:
                    del self._giving_back[key_id]

            task.add_done_callback(given_back)
        return task

    async def settle(self, admission: Admission, tokens: int, credits: float) -> None:
        """Count what the request really used, and give its place in flight back (once; never raises)."""
        if admission.settled:
            return
        admission.settled = True
        if admission.lease is not None:
            self._held.drop(admission.lease)
        key = admission.key
        additions: list[Addition] = [(budget_windows(admission.at), credits)]
        if key.limits.tpm is not None:
            additions.append(([(TOKENS, *minute(admission.at))], tokens - admission.tokens_counted))
        if admission.lease is None and not any(amount for _windows, amount in additions):
            return  # nothing to give back nor to count
        try:
            await self.counters.settle(key.id, admission.lease, additions)
        except Exception as exc:
            self.outage.failed(exc, "not counted")
            self._observer.usage_uncounted(key.label)
        else:
            self.outage.answered()

    async def spent(self, key: KeyRecord) -> dict[str, float]:
        """Credits the key spent today and this month (UTC), for the keys panel."""
        now = self._clock()
        used = await self.counters.used(key.id, budget_windows(now))
        return {"credits_today": used.get(CREDITS_DAY, 0.0), "credits_this_month": used.get(CREDITS_MONTH, 0.0)}
