"""The `GenerateAssistantResponse` HTTP client.

It opens one streaming reply: choose an account (q2api.amazonq.account_choice), get its token, walk
the account's hosts with the conversation (q2api.amazonq.host_walk), and retry with backoff and
jitter (q2api.amazonq.retry_policy) only while nothing has been read from a 200 reply. Once
`open_stream` yields, the caller owns the reply (q2api.amazonq.upstream_stream) and nothing is
retried. Leaving the context (normal end, an exception, a cancelled task after a client disconnect)
releases or closes the upstream connection, so an abandoned reply never leaks it.
"""

from __future__ import annotations

import functools
import ssl
import time

import aiohttp
from loguru import logger

from q2api.amazonq.account_access import Credential, CredentialPool
from q2api.amazonq.account_choice import AccountChoice
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.attempts import UpstreamAttempt, UpstreamTrace
from q2api.amazonq.body_sizes import BodySizes, is_size_refusal
from q2api.amazonq.errors import (
    NoAccountConfigured,
    RefreshRejected,
    RefusedForSize,
    RequestTooLarge,
    UpstreamError,
    is_model_refusal,
)
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.host_walk import HostWalk, is_profile_refusal
from q2api.amazonq.inflight import FleetSlots, InflightSlots
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver, attempt_outcome
from q2api.amazonq.retry_policy import RetryPolicy
from q2api.amazonq.turn_affinity import MoveReason, PinnedAccount, TurnAffinity
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.upstream_call import FIXED_HEADERS, TARGET, Opening, UpstreamCaller, read_error
from q2api.amazonq.upstream_config import DEFAULT_MAX_REQUEST_BYTES, UpstreamConfig
from q2api.amazonq.upstream_stream import REQUEST_ID_HEADER, UpstreamStream

NO_PROFILE_DETAIL = (
    "the Amazon Q host needs a profile (profileArn) and this account has none: sign in with an "
    "IAM Identity Center login that has a Q Developer profile, or give one with --profile-arn"
)
DEFAULT_KEEPALIVE_SECONDS = 300.0


def create_session(
    *,
    user_agent: str = "q2api",
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
    ssl_context: ssl.SSLContext | None = None,
) -> aiohttp.ClientSession:
    """The one shared client session (call inside the running loop, e.g. in the app's lifespan);
    every call it makes says `user_agent`.

    `limit=0`: no connection-pool ceiling, so the 101st concurrent stream opens
    a connection instead of queueing into a timeout. `keepalive_seconds`: an idle
    connection stays in the pool this long (aiohttp's default is 15 s), so a user's
    next turn minutes later reuses it instead of paying a new TLS handshake
    (A14: ≈340 ms; the upstream itself drops silent connections after 200–400 s). HTTP(S)_PROXY / NO_PROXY
    are honoured per URL by the callers (q2api.amazonq.proxy), not by
    `trust_env`, which costs a thread hop per request. Per-request timeouts
    are set by the client.
    """
    connector = aiohttp.TCPConnector(
        limit=0,
        ttl_dns_cache=300,
        keepalive_timeout=keepalive_seconds,
        ssl=ssl_context if ssl_context is not None else True,  # a context: tests trusting their own CA
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None),
        headers={"User-Agent": user_agent},
    )


class UpstreamClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        pool: CredentialPool,
        config: UpstreamConfig,
        observer: UpstreamObserver = NO_OBSERVER,
        hosts: HostChoice | None = None,
        proxies: AccountProxies | None = None,
        fleet: FleetSlots | None = None,
    ) -> None:
        """`proxies`: `session` with its HTTP(S)_PROXY routes, and the sessions of the accounts that have a
        proxy of their own (whoever made it closes it). `fleet`: the in-flight cap counted across every
        worker and replica too (q2api.fleet), not only in this process."""
        self._pool = pool
        self._config = config
        self._observer = observer
        self.hosts = hosts or HostChoice(config.endpoint, observer=observer)
        self.inflight = InflightSlots(config.account_max_inflight, fleet)
        self.accounts = AccountChoice(pool, self.inflight, wait=config.inflight_wait)
        # What each host accepted and refused of request sizes: in memory, per process (body_sizes.py).
        self.body_sizes = BodySizes()
        caller = UpstreamCaller(proxies or AccountProxies(session), config, observer, self.body_sizes)
        self._walk = HostWalk(self.hosts, caller, max_retries=config.max_retries)
        self._retries = RetryPolicy(config, pool, observer)

    def open_stream(
        self,
        payload: GenerateAssistantResponseRequest,
        trace: UpstreamTrace | None = None,
        affinity: TurnAffinity | None = None,
    ) -> OpenedReply:
        """Open a reply for `payload` (the converter's `{"conversationState": ...}`): `async with` it.
        `trace` gets one record per call made (retries included), however the opening ends; `affinity`:
        the turn's conversation, whose pinned account is asked first and told where the reply opened.

        Raises on entry: UpstreamHTTPError, UpstreamTimeout, UpstreamUnavailable,
        RefreshRejected, RefreshUnavailable (all UpstreamError).
        """
        return OpenedReply(self, payload, trace, affinity)

    async def _open(
        self,
        payload: GenerateAssistantResponseRequest,
        trace: UpstreamTrace | None,
        affinity: TurnAffinity | None = None,
    ) -> UpstreamStream:
        if not len(self._pool):
            raise NoAccountConfigured()
        started = time.monotonic()
        opening = Opening(payload, trace or UpstreamTrace())
        if affinity is not None and len(self._pool) < 2:
            affinity = None  # one account: nothing to choose between, and no pin worth a round trip
        pinned = await affinity.pinned() if affinity is not None else None
        try:
            async for try_ in self._retries.retrying(opening):
                with try_:
                    moved_because: MoveReason | None = None
                    if pinned is not None:
                        manager, moved_because = await self.accounts.take_pinned(
                            pinned.account_id, opening.model, opening.resting
                        )
                        opening.foreign_history = _foreign_history(opening.history_length, pinned, moved_because)
                    else:
                        manager = await self.accounts.take(opening.model, opening.resting)
                    try:
                        response = await self._attempt_once(opening, manager)
                    except BaseException as exc:
                        self.accounts.release(manager.account_id)
                        self._observer.upstream_attempt(attempt_outcome(exc))
                        raise
                    self._observer.upstream_attempt(attempt_outcome(None))
                    # A reply is open: an earlier call's refusal on this trace (a history signature, the
                    # reply then retried without it) is not the request's failure, nor a capture's reason.
                    opening.trace.failure = None
                    if affinity is not None:
                        affinity.served(manager.account_id, manager.label, moved_because, opening.foreign_history)
                    return UpstreamStream(
                        response,
                        account_id=manager.account_id,
                        account_label=manager.label,
                        attempts=try_.retry_state.attempt_number,
                        upstream_started_at=started,
                        read_timeout=self._config.read_timeout,
                        host=opening.served_by,
                        on_close=functools.partial(self.accounts.release, manager.account_id),
                    )
        except Exception as exc:
            opening.trace.failure = exc
            raise
        finally:
            # tenacity's closures keep `opening` in a reference cycle until the next garbage
            # collection; without its request body that costs a few hundred bytes, not the body.
            opening.release()
        raise AssertionError("unreachable: tenacity reraises the last error")  # pragma: no cover

    async def _attempt_once(self, opening: Opening, manager: Credential) -> aiohttp.ClientResponse:
        """One attempt with `manager`: its hosts walked; a refusal is reported to the pool and raised."""
        try:
            # The body is built after each token: a social login learns its profile ARN from the refresh.
            token = await manager.access_token()
            response, error = await self._walk.call(opening, manager, token)
        except RequestTooLarge:
            raise  # the request's fault, not the account's: nothing was sent
        except UpstreamError as exc:  # no reply: a dead login, the token service or Amazon Q unreachable
            self._pool.report_failure(manager.account_id, None, detail=str(exc))
            if isinstance(exc, RefreshRejected):
                opening.resting.add(manager.account_id)
            raise
        if response is not None and response.status == 200:
            self._pool.report_success(manager.account_id)
            return response

        if error is None:
            assert response is not None
            error = await read_error(response)
        kind = error.kind
        opening.trace.classify_last(kind.value)
        self._pool.report_failure(manager.account_id, kind, error.retry_after, detail=str(error))
        if is_model_refusal(error) and opening.model:
            self._model_refused(opening, manager)
        elif is_size_refusal(error, opening.sent_size):
            host = opening.trace.attempts[-1].host if opening.trace.attempts else ""
            self.body_sizes.refused(host, opening.model, opening.sent_size)
            self._observer.size_refusal("upstream")
            logger.info(
                "Amazon Q refused the request as too large",
                status=error.status,
                reason=error.reason,
                upstream_request_id=error.request_id,
                account=manager.label,
                host=host,
                body_bytes=opening.sent_size,
            )
            raise RefusedForSize(error, opening.sent_size, host) from None
        if error.suspended:
            await manager.mark_needs_login(f"suspended ({error.reason or error.code or error.status})")
        elif is_profile_refusal(error) and not manager.profile_arn:
            # Nothing the client sent can fix this: the account must get a profile (an IdC login
            # with one, looked up at its next refresh) before this host serves it.
            await manager.mark_needs_login(NO_PROFILE_DETAIL)
        if kind.account_scoped:
            opening.resting.add(manager.account_id)
        logger.info(
            "Amazon Q refused the request",
            status=error.status,
            code=error.code,
            reason=error.reason,
            upstream_request_id=error.request_id,
            account=manager.label,
        )
        raise error

    def _model_refused(self, opening: Opening, manager: Credential) -> None:
        """INVALID_MODEL_ID for a model the account was chosen for (its catalogue lists it): the account
        stops counting as having it and its catalogue is read again (the pool); the retry policy then
        asks another account that has it. One WARNING, naming no more than the account and the model."""
        model = opening.model or ""
        self._pool.model_refused(manager.account_id, model)
        rerouted = self._pool.has_alternative(opening.resting, model)
        self._observer.model_refusal("rerouted" if rerouted else "refused")
        where = "the request goes to another account that has it" if rerouted else "no other account has it"
        logger.warning(
            f"Amazon Q refused a model the account's catalogue lists (INVALID_MODEL_ID): account={manager.label} "
            f"model={model}; its catalogue is read again and {where}"
        )


def _foreign_history(history_length: int, pinned: PinnedAccount, moved_because: MoveReason | None) -> int:
    """How many first history messages carry reasoning the serving account did not make: all of them
    after a move; after none, what the pin says — unless the history is now shorter (compacted, or
    started again under the same session id), when it is all the serving account's own."""
    if moved_because is not None:
        return history_length
    return pinned.foreign_history if pinned.foreign_history <= history_length else 0


class OpenedReply:
    """`async with client.open_stream(payload) as stream:` — the reply, closed on exit.

    A class rather than `contextlib.asynccontextmanager`, whose generator would
    keep `payload` (the whole converted conversation) alive for as long as the
    reply streams; this one lets go of it as soon as the reply is open.
    """

    def __init__(
        self,
        client: UpstreamClient,
        payload: GenerateAssistantResponseRequest,
        trace: UpstreamTrace | None,
        affinity: TurnAffinity | None = None,
    ) -> None:
        self._client = client
        self._payload: GenerateAssistantResponseRequest | None = payload
        self._trace = trace
        self._affinity = affinity
        self._stream: UpstreamStream | None = None

    async def __aenter__(self) -> UpstreamStream:
        payload, self._payload = self._payload, None
        if payload is None:
            raise RuntimeError("an OpenedReply can be entered only once")
        self._stream = await self._client._open(payload, self._trace, self._affinity)
        return self._stream

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the reply (idempotent; also usable from synchronous clean-up code)."""
        if self._stream is not None:
            self._stream.close()


__all__ = [
    "DEFAULT_KEEPALIVE_SECONDS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "FIXED_HEADERS",
    "REQUEST_ID_HEADER",
    "TARGET",
    "OpenedReply",
    "UpstreamAttempt",
    "UpstreamClient",
    "UpstreamConfig",
    "UpstreamError",
    "UpstreamStream",
    "UpstreamTrace",
    "create_session",
    "is_profile_refusal",
]
