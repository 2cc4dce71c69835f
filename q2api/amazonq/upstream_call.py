"""One HTTP call to `GenerateAssistantResponse`, and what a request carries across its calls.

`Opening` is one `open_stream` call's state across its retries, account switches and hosts: the
conversation, encoded once per host shape; the accounts that failed it on their own; the request's
trace. `UpstreamCaller.post` sends one body to one host with one account's token and records the call
in the trace; transport failures come back as q2api.amazonq.errors exceptions, never aiohttp's.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from q2api.amazonq.account_access import Credential
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.attempts import UpstreamAttempt, UpstreamTrace, host_of
from q2api.amazonq.bearer import authorization_headers, token_type_of
from q2api.amazonq.body_sizes import BodySizes
from q2api.amazonq.errors import (
    HostUnreachable,
    RequestKnownTooLarge,
    RequestTooLarge,
    TimeoutPhase,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
    parse_error_reply,
)
from q2api.amazonq.hosts import Host, sends_profile, shape_document
from q2api.amazonq.observer import UpstreamObserver, attempt_outcome
from q2api.amazonq.turn_affinity import without_reasoning_before
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.upstream_config import UpstreamConfig
from q2api.amazonq.upstream_stream import REQUEST_ID_HEADER

TARGET = "AmazonCodeWhispererStreamingService.GenerateAssistantResponse"
FIXED_HEADERS = {  # every call; Authorization is added per call
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": TARGET,
    "x-amzn-codewhisperer-optout": "true",
}


class Opening:
    """What one `open_stream` call carries across its retries."""

    def __init__(self, payload: GenerateAssistantResponseRequest, trace: UpstreamTrace) -> None:
        self._payload: GenerateAssistantResponseRequest | None = payload
        self.trace = trace
        self.model = model_id(payload)
        self._bodies: dict[tuple[str | None, bool, int], bytes] = {}
        self.resting: set[str] = set()  # accounts that failed on their own account: try others first
        self.served_by = ""  # the host of the 200 reply
        self.history_length = len(payload["conversationState"].get("history") or ())
        # The attempt's account did not make the reasoning of this many first history messages (session
        # affinity moved the conversation): sent without it (q2api.amazonq.turn_affinity).
        self.foreign_history = 0
        self.sent_size = 0  # the size of the last body sent
        self.transport_failures: dict[str, int] = {}  # broken connections before any answer, by host URL
        self.extra_attempts = 0  # attempts granted beyond the retry budget: a host moved to gets its own

    def grant_attempts(self, count: int) -> None:
        self.extra_attempts += count

    def body_for(self, profile_arn: str | None, host: Host) -> bytes:
        """The body for `host`: with `profileArn` when given, without what the host refuses; encoded once
        per shape (a 1 MB conversation is not serialised again for each host that shares it)."""
        key = (profile_arn, host.refuses_legacy_fields, self.foreign_history)
        body = self._bodies.get(key)
        if body is None:
            assert self._payload is not None, "a released attempt sends nothing"
            payload = without_reasoning_before(dict(self._payload), self.foreign_history)
            document: dict[str, object] = shape_document(payload, host)
            if profile_arn:
                document["profileArn"] = profile_arn
            body = self._bodies[key] = orjson.dumps(document)
        return body

    def release(self) -> None:
        self._payload = None
        self._bodies.clear()


class UpstreamCaller:
    """Sends one body to one host, with the account's proxy route, timeouts and token."""

    def __init__(
        self, proxies: AccountProxies, config: UpstreamConfig, observer: UpstreamObserver, sizes: BodySizes
    ) -> None:
        self._account_proxies = proxies
        self.sizes = sizes
        self._config = config
        self._observer = observer
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=config.connect_timeout,
            sock_connect=config.connect_timeout,
            # Covers the wait for headers too, so the first-byte wait is the
            # smaller of this and first_byte_timeout.
            sock_read=config.read_timeout,
        )

    async def post(self, opening: Opening, manager: Credential, host: Host, token: str) -> aiohttp.ClientResponse:
        """One call, recorded in the request's trace with its host, its account and how it ended."""
        endpoint = host.url
        body = opening.body_for(manager.profile_arn if sends_profile(manager.auth_kind) else None, host)
        if len(body) > self._config.max_request_bytes:
            raise RequestTooLarge(len(body), self._config.max_request_bytes)
        refused_before = self.sizes.known_too_large(host.name, opening.model, len(body))
        if refused_before is not None:
            self._observer.size_refusal("local")
            raise RequestKnownTooLarge(len(body), host.name, refused_before)
        opening.sent_size = len(body)
        began = opening.trace.sending(endpoint, body)
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
            opening.trace.record(UpstreamAttempt(host.name, manager.label, outcome, status, seconds))
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


async def read_error(response: aiohttp.ClientResponse) -> UpstreamHTTPError:
    """The refusal `response` carries, its body read and the connection given back."""
    try:
        body = await response.read()
    except (TimeoutError, aiohttp.ClientError):
        body = b""
    finally:
        response.release()
    return parse_error_reply(response.status, response.headers, body, response.headers.get(REQUEST_ID_HEADER))


def model_id(payload: GenerateAssistantResponseRequest) -> str | None:
    return payload["conversationState"]["currentMessage"]["userInputMessage"].get("modelId")


def _status_outcome(status: int | None) -> str:
    """The outcome of a call that got an answer: "ok", or the HTTP status (its kind is known once the body is read)."""
    return "ok" if status == 200 else f"http_{status}"
