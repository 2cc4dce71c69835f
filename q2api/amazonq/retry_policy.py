"""When a failed attempt to open a reply is tried again, and after how long.

Retried only while nothing has been read from a 200 reply: a connection that broke or could not be
opened, a 5xx, throttling with a short enough Retry-After, and an account's own failure (a dead
login, a suspension) when another account can take the request — that one without waiting. The
wait is exponential with jitter, at least the upstream's Retry-After. A slow model (a first-byte
timeout) is not retried: asking again would only double the wait.
"""

from __future__ import annotations

import random

from loguru import logger
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from q2api.amazonq.account_access import CredentialPool
from q2api.amazonq.errors import (
    FailureKind,
    RefreshRejected,
    TimeoutPhase,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from q2api.amazonq.observer import UpstreamObserver
from q2api.amazonq.upstream_call import Opening
from q2api.amazonq.upstream_config import UpstreamConfig


class RetryPolicy:
    def __init__(self, config: UpstreamConfig, pool: CredentialPool, observer: UpstreamObserver) -> None:
        self._config = config
        self._pool = pool
        self._observer = observer

    def retrying(self, opening: Opening) -> AsyncRetrying:
        """The attempts of one opening: `async for try_ in policy.retrying(opening): with try_: …`."""
        return AsyncRetrying(
            stop=stop_after_attempt(self._config.max_retries + 1),
            retry=retry_if_exception(lambda exc: self.should_retry(exc, opening)),
            wait=lambda state: self.wait_before_retry(state, opening),
            before_sleep=self.log_retry,
            reraise=True,
        )

    def should_retry(self, exc: BaseException, opening: Opening) -> bool:
        if self.another_account_can_take(exc, opening):
            return True
        if isinstance(exc, UpstreamUnavailable):
            return True
        if isinstance(exc, UpstreamTimeout):
            return exc.phase is TimeoutPhase.CONNECT  # a slow model is not fixed by asking again
        if isinstance(exc, UpstreamHTTPError):
            kind = exc.kind
            if kind is FailureKind.THROTTLED and (exc.retry_after or 0) > self._config.backoff_max:
                return False  # waiting that long here would only hide the 429 from the client
            return kind.retryable
        return False

    def another_account_can_take(self, exc: BaseException | None, opening: Opening) -> bool:
        """The failure was this account's own, and another account can take the request now."""
        account_scoped = isinstance(exc, RefreshRejected) or (
            isinstance(exc, UpstreamHTTPError) and exc.kind.account_scoped
        )
        return account_scoped and self._pool.has_alternative(opening.resting, opening.model)

    def wait_before_retry(self, state: RetryCallState, opening: Opening) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if self.another_account_can_take(exc, opening):
            return 0.0
        hinted = float(exc.retry_after) if isinstance(exc, UpstreamHTTPError) and exc.retry_after else 0.0
        ceiling = min(self._config.backoff_max, self._config.backoff_initial * 2 ** (state.attempt_number - 1))
        return max(hinted, random.uniform(ceiling / 2, ceiling))  # jitter spreads synchronized retries

    def log_retry(self, state: RetryCallState) -> None:
        self._observer.upstream_retry()
        exc = state.outcome.exception() if state.outcome else None
        # Upstream text goes into the message, so no format kwargs (loguru would str.format it).
        logger.bind(attempt=state.attempt_number, wait=round(state.upcoming_sleep, 2)).warning(
            f"retrying the Amazon Q request: {exc}"
        )
