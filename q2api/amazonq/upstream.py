"""The `GenerateAssistantResponse` HTTP client.

It opens one streaming reply: pick an account, get its token, POST the
conversation, and retry (with backoff and jitter) only while nothing has been
read from a 200 reply — connection errors, 5xx, throttling; a rejected bearer
token is refreshed once and the call repeated once. Once `open_stream` yields,
the caller owns the reply and nothing is retried. Leaving the context (normal
end, an exception, a cancelled task after a client disconnect) releases or
closes the upstream connection, so an abandoned reply never leaks it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import AsyncIterator

import aiohttp
import orjson
from loguru import logger
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from q2api.amazonq.account_access import Credential, CredentialPool
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.attempts import UpstreamAttempt, UpstreamTrace, host_of
from q2api.amazonq.bearer import authorization_headers, token_type_of
from q2api.amazonq.errors import (
    FailureKind,
    ModelNotServed,
    NoAccountConfigured,
    RefreshRejected,
    TimeoutPhase,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
    needs_profile,
    parse_error_reply,
)
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver, attempt_outcome
from q2api.amazonq.proxy import proxy_route
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


@dataclasses.dataclass(frozen=True)
class UpstreamConfig:
    endpoint: str
    connect_timeout: float = 10.0
    first_byte_timeout: float = 120.0
    read_timeout: float = 300.0  # between two reads of the body
    max_retries: int = 3  # attempts after the first
    backoff_initial: float = 0.5
    backoff_max: float = 8.0  # also the longest Retry-After honoured by waiting instead of failing


def create_session(*, user_agent: str = "q2api") -> aiohttp.ClientSession:
    """The one shared client session (call inside the running loop, e.g. in the app's lifespan);
    every call it makes says `user_agent`.

    `limit=0`: no connection-pool ceiling, so the 101st concurrent stream opens
    a connection instead of queueing into a timeout. HTTP(S)_PROXY / NO_PROXY
    are honoured per URL by the callers (q2api.amazonq.proxy), not by
    `trust_env`, which costs a thread hop per request. Per-request timeouts
    are set by the client.
    """
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
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
    ) -> None:
        self._response = response
        self.account_id = account_id
        self.account_label = account_label
        self.attempts = attempts
        self.request_id: str | None = response.headers.get(REQUEST_ID_HEADER)
        self.upstream_started_at = upstream_started_at  # time.monotonic() when the first attempt began
        self.headers_received_at = time.monotonic()
        self._read_timeout = read_timeout
        self._at_eof = False
        # The silence between two reads is timed here, with one lazy timer (wait_deadline.py),
        # no longer by aiohttp's sock_read, which re-arms a loop timer on every read.
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
        proxies: AccountProxies | None = None,
    ) -> None:
        """`proxies`: the sessions of the accounts that have a proxy of their own (whoever made it closes it)."""
        self._session = session
        self._proxies = proxies or AccountProxies(session)
        self._pool = pool
        self._config = config
        self._observer = observer
        self._proxy = proxy_route(config.endpoint)._asdict()  # resolved once: the endpoint never changes
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
                    try:
                        response, manager = await self._attempt_once(attempt)
                    except BaseException as exc:
                        self._observer.upstream_attempt(attempt_outcome(exc))
                        raise
                    self._observer.upstream_attempt(attempt_outcome(None))
                    return UpstreamStream(
                        response,
                        account_id=manager.account_id,
                        account_label=manager.label,
                        attempts=try_.retry_state.attempt_number,
                        upstream_started_at=started,
                        read_timeout=self._config.read_timeout,
                    )
        except Exception as exc:
            attempt.trace.failure = exc
            raise
        finally:
            # tenacity's closures keep `attempt` in a reference cycle until the next garbage
            # collection; without its request body that costs a few hundred bytes, not the body.
            attempt.release()
        raise AssertionError("unreachable: tenacity reraises the last error")  # pragma: no cover

    async def _attempt_once(self, attempt: _Attempt) -> tuple[aiohttp.ClientResponse, Credential]:
        # Only an account whose catalogue has the model: another one would answer INVALID_MODEL_ID.
        manager = self._pool.pick(exclude=attempt.resting, model=attempt.model) or self._pool.pick(model=attempt.model)
        if manager is None:
            if not len(self._pool):  # every account left the pool since the request started
                raise NoAccountConfigured()
            raise ModelNotServed(attempt.model or "")
        try:
            # The body is built after each token: a social login learns its profile ARN from the refresh.
            token = await manager.access_token()
            response = await self._post(attempt, manager, token)
            error = await _read_error(response) if response.status in (401, 403) else None
            if error is not None:
                attempt.trace.classify_last(error.kind.value)
            if error is not None and error.kind is FailureKind.BEARER_INVALID:
                # Expired or revoked early: refresh once (unless another request
                # already did) and repeat the call once, outside the retry budget.
                token = await manager.refresh_after_rejection(token)
                response = await self._post(attempt, manager, token)
                error = None
        except UpstreamError as exc:  # no reply: a dead login, the token service or Amazon Q unreachable
            self._pool.report_failure(manager.account_id, None, detail=str(exc))
            if isinstance(exc, RefreshRejected):
                attempt.resting.add(manager.account_id)
            raise
        if response.status == 200:
            self._pool.report_success(manager.account_id)
            return response, manager

        if error is None:
            error = await _read_error(response)
        kind = error.kind
        attempt.trace.classify_last(kind.value)
        self._pool.report_failure(manager.account_id, kind, error.retry_after, detail=str(error))
        if error.suspended:
            await manager.mark_needs_login(f"suspended ({error.reason or error.code or error.status})")
        elif needs_profile(error) and not manager.profile_arn:
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

    async def _post(self, attempt: _Attempt, manager: Credential, token: str) -> aiohttp.ClientResponse:
        """One call, recorded in the request's trace with its host, its account and how it ended."""
        endpoint = self._config.endpoint
        body = attempt.body_for(manager.profile_arn)
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
            attempt.trace.record(UpstreamAttempt(host_of(endpoint), manager.label, outcome, status, seconds))

    async def _send(self, endpoint: str, body: bytes, token: str, manager: Credential) -> aiohttp.ClientResponse:
        headers = dict(FIXED_HEADERS)
        headers.update(authorization_headers(token, token_type_of(manager.auth_kind)))
        # An account's own proxy, else the session (and HTTP(S)_PROXY route) every account shares.
        session, route = (
            (self._proxies.session_for(manager.proxy_url), {}) if manager.proxy_url else (self._session, self._proxy)
        )
        try:
            async with asyncio.timeout(self._config.first_byte_timeout):
                return await session.post(endpoint, data=body, headers=headers, timeout=self._timeout, **route)
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamTimeout(TimeoutPhase.CONNECT, self._config.connect_timeout) from None
        except (TimeoutError, aiohttp.ServerTimeoutError):
            seconds = min(self._config.first_byte_timeout, self._config.read_timeout)
            raise UpstreamTimeout(TimeoutPhase.FIRST_BYTE, seconds) from None
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
        self._bodies: dict[str | None, bytes] = {}
        self.resting: set[str] = set()  # accounts that failed on their own account: try others first

    def body_for(self, profile_arn: str | None) -> bytes:
        body = self._bodies.get(profile_arn)
        if body is None:
            assert self._payload is not None, "a released attempt sends nothing"
            document: GenerateAssistantResponseRequest = self._payload
            if profile_arn:
                document = {**self._payload, "profileArn": profile_arn}
            body = self._bodies[profile_arn] = orjson.dumps(document)
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
