"""The `GenerateAssistantResponse` HTTP client.

It opens one streaming reply: pick an account, get its token, POST the
conversation, and retry (with backoff and jitter) only while nothing has been
read from a 200 reply — connection errors, 5xx, throttling; a rejected bearer
token is refreshed once and the call repeated once. Each account has an ordered
list of hosts (q2api.amazonq.host_choice): a host that answers with an auth- or
route-shaped failure (401/403/404 after that refresh, or no connection at all)
rests for the account and the call moves to its next host, with a body shaped
for that host (q2api.amazonq.hosts). Once `open_stream` yields,
the caller owns the reply and nothing is retried. Leaving the context (normal
end, an exception, a cancelled task after a client disconnect) releases or
closes the upstream connection, so an abandoned reply never leaks it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable

import aiohttp
import orjson
from loguru import logger
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from q2api.amazonq.account_access import Credential, CredentialPool
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.attempts import UpstreamAttempt, UpstreamTrace, host_of
from q2api.amazonq.bearer import authorization_headers, token_type_of
from q2api.amazonq.errors import (
    AccountsBusy,
    FailureKind,
    HostUnreachable,
    ModelNotServed,
    NoAccountConfigured,
    RefreshRejected,
    RequestTooLarge,
    TimeoutPhase,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
    parse_error_reply,
)
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.hosts import Host, sends_profile, shape_document
from q2api.amazonq.inflight import FleetSlots, InflightSlots
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver, attempt_outcome
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.wait_deadline import WaitDeadline

TARGET = "AmazonCodeWhispererStreamingService.GenerateAssistantResponse"
REQUEST_ID_HEADER = "x-amzn-requestid"
NO_PROFILE_DETAIL = (
    "the Amazon Q host needs a profile (profileArn) and this account has none: sign in with an "
    "IAM Identity Center login that has a Q Developer profile, or give one with --profile-arn"
)
FIXED_HEADERS = {  # every call; Authorization is added per call
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": TARGET,
    "x-amzn-codewhisperer-optout": "true",
}


# Statuses that say "not this host for this token" rather than "not this request" (A8.5, NR's
# KIRO_ENDPOINT_FALLBACK_STATUSES): the account's next host may serve the same body.
FAILOVER_STATUSES = frozenset({401, 403, 404})
PROFILE_REQUIRED_TEXT = "profilearn is required"
DEFAULT_KEEPALIVE_SECONDS = 300.0
# The largest request body sources saw Amazon Q accept (docs/protocol.md#limits: bodies of 6.34 MB
# passed, 7.34 MB failed; an early 1.3 MB failure was not seen again once the limit moved to tokens).
DEFAULT_MAX_REQUEST_BYTES = 6_340_000


@dataclasses.dataclass(frozen=True)
class UpstreamConfig:
    # AMAZONQ_ENDPOINT: "" derives each account's hosts; one URL or a comma-separated list overrides them.
    endpoint: str = ""
    connect_timeout: float = 10.0
    first_byte_timeout: float = 120.0
    read_timeout: float = 300.0  # between two reads of the body
    max_retries: int = 3  # attempts after the first
    backoff_initial: float = 0.5
    backoff_max: float = 8.0  # also the longest Retry-After honoured by waiting instead of failing
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # a larger encoded body is never sent
    account_max_inflight: int = 8  # requests in flight per account (peers: Amazon Q tolerates 5–8)
    inflight_wait: float = 10.0  # how long a request waits for a free slot before "overloaded"


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


class UpstreamStream:
    """An open 200 reply. Read it with `chunks()`; the owner of `open_stream` closes it."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        *,
        account_id: str,
        account_label: str,
        attempts: int,
        upstream_started_at: float,
        read_timeout: float,
        host: str = "",
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._response = response
        self._on_close = on_close  # gives the account's in-flight slot back, once
        self.account_id = account_id
        self.account_label = account_label
        self.host = host  # the host that served the reply
        self.attempts = attempts
        self.request_id: str | None = response.headers.get(REQUEST_ID_HEADER)
        self.upstream_started_at = upstream_started_at  # time.monotonic() when the first attempt began
        self.headers_received_at = time.monotonic()
        self._read_timeout = read_timeout
        self._at_eof = False
        # The silence between two reads of the body is timed here, with one lazy timer per stream
        # (wait_deadline.py). aiohttp's sock_read, which times the wait for the headers, is switched
        # off for the body: it re-arms a loop timer on every read (with the pump's per-wait timer, that
        # cost a paced reply ~15 % more CPU: BENCHMARKS.md, the table of optimisations).
        self._silence = WaitDeadline()
        self._last_bytes_at = asyncio.get_running_loop().time()
        connection = response.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None

    @property
    def time_to_headers(self) -> float:
        """Seconds from the first attempt to the 200 headers (retries included)."""
        return self.headers_received_at - self.upstream_started_at

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw body bytes as they arrive; raises UpstreamTimeout / UpstreamUnavailable mid-reply."""
        return _Chunks(self)

    def buffered(self) -> bytes | None:
        """Body bytes already received, taken without waiting; None if there are none (or the body failed).

        A failed body raises its error on the next `chunks()` read, where it is mapped.
        """
        try:
            data = self._response.content.read_nowait()
        except Exception:
            return None
        if not data:
            return None
        self._last_bytes_at = asyncio.get_running_loop().time()
        return data

    async def _read(self) -> bytes:
        silence = self._silence
        silence.begin(self._last_bytes_at + self._read_timeout)
        try:
            data = await self._response.content.readany()
        except asyncio.CancelledError:
            if silence.expired():
                raise UpstreamTimeout(TimeoutPhase.BETWEEN_FRAMES, self._read_timeout) from None
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamTimeout(TimeoutPhase.BETWEEN_FRAMES, self._read_timeout) from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"the connection to Amazon Q broke mid-reply ({type(exc).__name__})") from None
        finally:
            silence.end()
        if not data:
            self._at_eof = True
        self._last_bytes_at = asyncio.get_running_loop().time()
        return data

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
        self._silence.close()
        # A fully read reply can give its connection back to the pool; a
        # half-read one must drop it, which is what tells the upstream to stop.
        if self._at_eof:
            self._response.release()
        else:
            self._response.close()


class _Chunks:
    """An async iterator over body reads (a class, not a generator: nothing to finalise)."""

    def __init__(self, stream: UpstreamStream) -> None:
        self._stream = stream

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        data = await self._stream._read()
        if not data:
            raise StopAsyncIteration
        return data


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
        self._account_proxies = proxies or AccountProxies(session)
        self._pool = pool
        self._config = config
        self._observer = observer
        self.hosts = hosts or HostChoice(config.endpoint, observer=observer)
        self.inflight = InflightSlots(config.account_max_inflight, fleet)
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=config.connect_timeout,
            sock_connect=config.connect_timeout,
            # Covers the wait for headers too, so the first-byte wait is the
            # smaller of this and first_byte_timeout.
            sock_read=config.read_timeout,
        )

    def open_stream(self, payload: GenerateAssistantResponseRequest, trace: UpstreamTrace | None = None) -> OpenedReply:
        """Open a reply for `payload` (the converter's `{"conversationState": ...}`): `async with` it.
        `trace` gets one record per call made (retries included), however the opening ends.

        Raises on entry: UpstreamHTTPError, UpstreamTimeout, UpstreamUnavailable,
        RefreshRejected, RefreshUnavailable (all UpstreamError).
        """
        return OpenedReply(self, payload, trace)

    async def _open(self, payload: GenerateAssistantResponseRequest, trace: UpstreamTrace | None) -> UpstreamStream:
        if not len(self._pool):
            raise NoAccountConfigured()
        started = time.monotonic()
        attempt = _Attempt(payload, trace or UpstreamTrace())
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._config.max_retries + 1),
            retry=retry_if_exception(lambda exc: self._should_retry(exc, attempt)),
            wait=lambda state: self._wait_before_retry(state, attempt),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for try_ in retrying:
                with try_:
                    manager = await self._take_slot(attempt)
                    try:
                        response = await self._attempt_once(attempt, manager)
                    except BaseException as exc:
                        self.inflight.release(manager.account_id)
                        self._observer.upstream_attempt(attempt_outcome(exc))
                        raise
                    self._observer.upstream_attempt(attempt_outcome(None))
                    # A reply is open: an earlier call's refusal on this trace (a history signature, the
                    # reply then retried without it) is not the request's failure, nor a capture's reason.
                    attempt.trace.failure = None
                    return UpstreamStream(
                        response,
                        account_id=manager.account_id,
                        account_label=manager.label,
                        attempts=try_.retry_state.attempt_number,
                        upstream_started_at=started,
                        read_timeout=self._config.read_timeout,
                        host=attempt.served_by,
                        on_close=functools.partial(self.inflight.release, manager.account_id),
                    )
        except Exception as exc:
            attempt.trace.failure = exc
            raise
        finally:
            # tenacity's closures keep `attempt` in a reference cycle until the next garbage
            # collection; without its request body that costs a few hundred bytes, not the body.
            attempt.release()
        raise AssertionError("unreachable: tenacity reraises the last error")  # pragma: no cover

    def _pick(self, attempt: _Attempt) -> Credential | None:
        """The least busy account that may serve (and has a free slot), preferring those not resting.

        Only an account whose catalogue has the model: another one would answer INVALID_MODEL_ID.
        """
        model = attempt.model
        for level in self.inflight.levels():  # idle accounts first, then the next least busy
            chosen = self._pool.pick(exclude=attempt.resting | self.inflight.busier_than(level), model=model)
            if chosen is not None:
                return chosen
        return self._pool.pick(exclude=self.inflight.full(), model=model)  # a resting one, rather than none

    async def _take_slot(self, attempt: _Attempt) -> Credential:
        """An account for the next call, its in-flight slot taken; waits briefly when all are full."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.inflight_wait
        while True:
            manager = self._pick(attempt)
            if manager is not None:
                if await self.inflight.acquire(manager.account_id):
                    return manager
                continue  # full across the fleet: `_pick` now knows it, and looks at the others
            if self._pool.pick(model=attempt.model) is None:  # not busy: no account may serve at all
                if not len(self._pool):  # every account left the pool since the request started
                    raise NoAccountConfigured()
                raise ModelNotServed(attempt.model or "")
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.inflight.wait_for_release(remaining):
                # A reply takes seconds to minutes; a short wait lets a few finish before the client retries.
                raise AccountsBusy(self.inflight.cap, self._config.inflight_wait, retry_after=5)

    async def _attempt_once(self, attempt: _Attempt, manager: Credential) -> aiohttp.ClientResponse:
        try:
            # The body is built after each token: a social login learns its profile ARN from the refresh.
            token = await manager.access_token()
            response, error = await self._post_on_hosts(attempt, manager, token)
        except RequestTooLarge:
            raise  # the request's fault, not the account's: nothing was sent
        except UpstreamError as exc:  # no reply: a dead login, the token service or Amazon Q unreachable
            self._pool.report_failure(manager.account_id, None, detail=str(exc))
            if isinstance(exc, RefreshRejected):
                attempt.resting.add(manager.account_id)
            raise
        if response is not None and response.status == 200:
            self._pool.report_success(manager.account_id)
            return response

        if error is None:
            assert response is not None
            error = await _read_error(response)
        kind = error.kind
        attempt.trace.classify_last(kind.value)
        self._pool.report_failure(manager.account_id, kind, error.retry_after, detail=str(error))
        if error.suspended:
            await manager.mark_needs_login(f"suspended ({error.reason or error.code or error.status})")
        elif is_profile_refusal(error) and not manager.profile_arn:
            # Nothing the client sent can fix this: the account must get a profile (an IdC login
            # with one, looked up at its next refresh) before this host serves it.
            await manager.mark_needs_login(NO_PROFILE_DETAIL)
        if kind.account_scoped:
            attempt.resting.add(manager.account_id)
        logger.info(
            "Amazon Q refused the request",
            status=error.status,
            code=error.code,
            reason=error.reason,
            upstream_request_id=error.request_id,
            account=manager.label,
        )
        raise error

    async def _post_on_hosts(
        self, attempt: _Attempt, manager: Credential, token: str
    ) -> tuple[aiohttp.ClientResponse | None, UpstreamHTTPError | None]:
        """Call the account's hosts in order until one answers with something else than "not here".

        Returns the answer (a response, or the error already read from it). A rejected bearer token
        is refreshed once and repeated on the same host first — it may just have expired; if the host
        still refuses it, the host refuses this kind of token (A8.3) and the next host is tried.
        """
        hosts = self.hosts.hosts(manager)
        if not hosts:
            detail = "no Amazon Q host takes this account's requests (the host needs a profileArn it has none of)"
            await manager.mark_needs_login(detail)
            raise RefreshRejected(manager.label, detail)
        refreshed = False
        for index, host in enumerate(hosts):
            following = hosts[index + 1] if index + 1 < len(hosts) else None
            try:
                response = await self._post(attempt, manager, host, token)
            except (HostUnreachable, UpstreamTimeout) as exc:
                connect_failed = isinstance(exc, HostUnreachable) or exc.phase is TimeoutPhase.CONNECT
                if following is None or not connect_failed:
                    raise
                self.hosts.failed(
                    manager, host, following, "unreachable" if isinstance(exc, HostUnreachable) else "connect_timeout"
                )
                continue
            answer, error = await self._judged(attempt, manager, host, response)
            if error is not None and error.kind is FailureKind.BEARER_INVALID and not refreshed:
                # Expired or revoked early: refresh once (unless another request already did) and
                # repeat the call once on this host, outside the retry budget; its answer is judged
                # like the first (a "profileArn is required" still moves on to the next host).
                token = await manager.refresh_after_rejection(token)
                refreshed = True
                response = await self._post(attempt, manager, host, token)
                answer, error = await self._judged(attempt, manager, host, response)
            if error is None:
                return answer, None
            if error.status == 400 and not is_profile_refusal(error):
                return None, error  # a 400 about the body: terminal, whichever host answered it
            if following is None or error.suspended:
                return None, error  # a suspension is the account's, not the host's
            self.hosts.failed(manager, host, following, str(error.status))
        raise AssertionError("unreachable: the last host's answer is returned")  # pragma: no cover

    async def _judged(
        self, attempt: _Attempt, manager: Credential, host: Host, response: aiohttp.ClientResponse
    ) -> tuple[aiohttp.ClientResponse | None, UpstreamHTTPError | None]:
        """`host`'s answer as the response to relay (a 200, or a refusal no other host would change),
        else as the error read from it, which the caller weighs: refresh, move on, or give up."""
        if response.status not in FAILOVER_STATUSES and not _may_be_profile_refusal(response):
            return self._answered(attempt, manager, host, response), None
        error = await _read_error(response)
        attempt.trace.classify_last(error.kind.value)
        return None, error

    def _answered(
        self, attempt: _Attempt, manager: Credential, host: Host, response: aiohttp.ClientResponse
    ) -> aiohttp.ClientResponse:
        """`host` answered with something else than "not here": a 200 records it as the one that served."""
        if response.status == 200:
            attempt.served_by = host.name
            self.hosts.served(manager, host)
        return response

    async def _post(self, attempt: _Attempt, manager: Credential, host: Host, token: str) -> aiohttp.ClientResponse:
        """One call, recorded in the request's trace with its host, its account and how it ended."""
        endpoint = host.url
        body = attempt.body_for(manager.profile_arn if sends_profile(manager.auth_kind) else None, host)
        if len(body) > self._config.max_request_bytes:
            raise RequestTooLarge(len(body), self._config.max_request_bytes)
        began = attempt.trace.sending(endpoint, body)
        status: int | None = None
        failure: BaseException | None = None
        try:
            response = await self._send(endpoint, body, token, manager)
        except BaseException as exc:
            failure = exc
            raise
        else:
            status = response.status
            return response
        finally:
            outcome = attempt_outcome(failure) if failure is not None else _status_outcome(status)
            seconds = time.monotonic() - began
            attempt.trace.record(UpstreamAttempt(host.name, manager.label, outcome, status, seconds))
            self._observer.host_attempt(host.name, outcome)

    async def _send(self, endpoint: str, body: bytes, token: str, manager: Credential) -> aiohttp.ClientResponse:
        headers = dict(FIXED_HEADERS)
        headers.update(authorization_headers(token, token_type_of(manager.auth_kind)))
        # An account's own proxy, else the session (and HTTP(S)_PROXY route) every account shares.
        session, route = self._account_proxies.route(manager.proxy_url, endpoint)
        try:
            async with asyncio.timeout(self._config.first_byte_timeout):
                return await session.post(endpoint, data=body, headers=headers, timeout=self._timeout, **route)
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamTimeout(TimeoutPhase.CONNECT, self._config.connect_timeout) from None
        except (TimeoutError, aiohttp.ServerTimeoutError):
            seconds = min(self._config.first_byte_timeout, self._config.read_timeout)
            raise UpstreamTimeout(TimeoutPhase.FIRST_BYTE, seconds) from None
        except aiohttp.ClientConnectorError as exc:  # refused, no such name, TLS: nothing reached the host
            raise HostUnreachable(
                f"cannot reach Amazon Q at {host_of(endpoint)} ({type(exc).__name__}: {exc})"
            ) from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"cannot reach Amazon Q ({type(exc).__name__}: {exc})") from None

    def _should_retry(self, exc: BaseException, attempt: _Attempt) -> bool:
        if self._another_account_can_take(exc, attempt):
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

    def _another_account_can_take(self, exc: BaseException | None, attempt: _Attempt) -> bool:
        """The failure was this account's own, and another account can take the request now."""
        account_scoped = isinstance(exc, RefreshRejected) or (
            isinstance(exc, UpstreamHTTPError) and exc.kind.account_scoped
        )
        return account_scoped and self._pool.has_alternative(attempt.resting, attempt.model)

    def _wait_before_retry(self, state: RetryCallState, attempt: _Attempt) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if self._another_account_can_take(exc, attempt):
            return 0.0
        hinted = float(exc.retry_after) if isinstance(exc, UpstreamHTTPError) and exc.retry_after else 0.0
        ceiling = min(self._config.backoff_max, self._config.backoff_initial * 2 ** (state.attempt_number - 1))
        return max(hinted, random.uniform(ceiling / 2, ceiling))  # jitter spreads synchronized retries

    def _log_retry(self, state: RetryCallState) -> None:
        self._observer.upstream_retry()
        exc = state.outcome.exception() if state.outcome else None
        # Upstream text goes into the message, so no format kwargs (loguru would str.format it).
        logger.bind(attempt=state.attempt_number, wait=round(state.upcoming_sleep, 2)).warning(
            f"retrying the Amazon Q request: {exc}"
        )


class _Attempt:
    """What one `open_stream` call carries across its retries."""

    def __init__(self, payload: GenerateAssistantResponseRequest, trace: UpstreamTrace) -> None:
        self._payload: GenerateAssistantResponseRequest | None = payload
        self.trace = trace
        self.model = _model_id(payload)
        self._bodies: dict[tuple[str | None, bool], bytes] = {}
        self.resting: set[str] = set()  # accounts that failed on their own account: try others first
        self.served_by = ""  # the host of the 200 reply

    def body_for(self, profile_arn: str | None, host: Host) -> bytes:
        """The body for `host`: with `profileArn` when given, without what the host refuses; encoded once
        per shape (a 1 MB conversation is not serialised again for each host that shares it)."""
        key = (profile_arn, host.refuses_legacy_fields)
        body = self._bodies.get(key)
        if body is None:
            assert self._payload is not None, "a released attempt sends nothing"
            document: dict[str, object] = shape_document(dict(self._payload), host)
            if profile_arn:
                document["profileArn"] = profile_arn
            body = self._bodies[key] = orjson.dumps(document)
        return body

    def release(self) -> None:
        self._payload = None
        self._bodies.clear()


class OpenedReply:
    """`async with client.open_stream(payload) as stream:` — the reply, closed on exit.

    A class rather than `contextlib.asynccontextmanager`, whose generator would
    keep `payload` (the whole converted conversation) alive for as long as the
    reply streams; this one lets go of it as soon as the reply is open.
    """

    def __init__(
        self, client: UpstreamClient, payload: GenerateAssistantResponseRequest, trace: UpstreamTrace | None
    ) -> None:
        self._client = client
        self._payload: GenerateAssistantResponseRequest | None = payload
        self._trace = trace
        self._stream: UpstreamStream | None = None

    async def __aenter__(self) -> UpstreamStream:
        payload, self._payload = self._payload, None
        if payload is None:
            raise RuntimeError("an OpenedReply can be entered only once")
        self._stream = await self._client._open(payload, self._trace)
        return self._stream

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the reply (idempotent; also usable from synchronous clean-up code)."""
        if self._stream is not None:
            self._stream.close()


def _may_be_profile_refusal(response: aiohttp.ClientResponse) -> bool:
    """A 400 whose body must be read to know whether it is the host's "profileArn is required"."""
    return response.status == 400


def is_profile_refusal(error: UpstreamHTTPError) -> bool:
    """The runtime host wants a profile the request has none of (A8.4): the host's rule, not the body's
    fault, so the account's next host may serve it (OR PR #13193 moves on for exactly this 400)."""
    return error.status == 400 and PROFILE_REQUIRED_TEXT in error.message.lower()


def _status_outcome(status: int | None) -> str:
    """The outcome of a call that got an answer: "ok", or the HTTP status (its kind is known once the body is read)."""
    return "ok" if status == 200 else f"http_{status}"


def _model_id(payload: GenerateAssistantResponseRequest) -> str | None:
    return payload["conversationState"]["currentMessage"]["userInputMessage"].get("modelId")


async def _read_error(response: aiohttp.ClientResponse) -> UpstreamHTTPError:
    try:
        body = await response.read()
    except (TimeoutError, aiohttp.ClientError):
        body = b""
    finally:
        response.release()
    return parse_error_reply(response.status, response.headers, body, response.headers.get(REQUEST_ID_HEADER))


__all__ = [
    "UpstreamAttempt",
    "UpstreamClient",
    "UpstreamConfig",
    "UpstreamError",
    "UpstreamStream",
    "UpstreamTrace",
    "create_session",
]
