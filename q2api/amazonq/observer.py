"""Hooks through which the server counts what the Amazon Q side does, without this package knowing how.

The protocol package imports nothing outside itself, so it cannot reach the
metrics room; the server passes an :class:`UpstreamObserver` built from it
instead. Every hook takes only bounded, secret-free values (an outcome name).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from q2api.amazonq.errors import (
    AccountsBusy,
    RefreshRejected,
    RefreshUnavailable,
    RequestTooLarge,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
)


def _ignore(*_: object) -> None:
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class UpstreamObserver:
    # One call to Amazon Q finished: "ok", a FailureKind value, "timeout", "unreachable", …
    upstream_attempt: Callable[[str], None] = _ignore
    # One call to Amazon Q finished on a host: its name (`runtime.us-east-1.kiro.dev`) and the outcome.
    host_attempt: Callable[[str, str], None] = _ignore
    # A request moved from one of its account's hosts to the next: from, to (host names).
    host_failover: Callable[[str, str], None] = _ignore
    # A request moved to its account's next host, and why: "unreachable", "connect_timeout",
    # "connection_broken" or the status ("401", "403", "404"; "400": the host's "profileArn is required").
    host_switch: Callable[[str], None] = _ignore
    # A body judged too large: "upstream" (Amazon Q refused it, size-shaped) or "local" (answered by the
    # gateway from what the host refused before, no call made).
    size_refusal: Callable[[str], None] = _ignore
    # Amazon Q answered INVALID_MODEL_ID for a model the account's catalogue lists: "rerouted" to another
    # account that has it, or "refused" (no other account could take it).
    model_refusal: Callable[[str], None] = _ignore
    # A failed call is about to be repeated (tenacity's before-sleep).
    upstream_retry: Callable[[], None] = _ignore
    # A token refresh finished: see the REFRESH_* outcomes below.
    token_refresh: Callable[[str], None] = _ignore
    # An account's credits were read (getUsageLimits): account id, label, used, limit.
    account_credits: Callable[[str, str, float, float], None] = _ignore


NO_OBSERVER = UpstreamObserver()

REFRESH_SUCCESS = "success"
REFRESH_ADOPTED = "adopted"  # another worker had just refreshed it: its token was taken over
REFRESH_REJECTED = "rejected"  # the refresh token or registration is dead: a new login is needed
REFRESH_UNAVAILABLE = "unavailable"  # the token service could not be reached or failed


def attempt_outcome(error: BaseException | None) -> str:
    """The bounded outcome name of one upstream call (None = it succeeded)."""
    if error is None:
        return "ok"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"  # the client left while the call was under way
    if isinstance(error, UpstreamHTTPError):
        return error.kind.value
    if isinstance(error, AccountsBusy):
        return "accounts_busy"  # no call made: every account had its cap in flight
    if isinstance(error, RequestTooLarge):
        return "too_large"  # refused before sending
    if isinstance(error, UpstreamTimeout):
        return "timeout"
    if isinstance(error, UpstreamUnavailable):
        return "unreachable"
    if isinstance(error, RefreshRejected):
        return "refresh_rejected"
    if isinstance(error, RefreshUnavailable):
        return "refresh_unavailable"
    return "other"
