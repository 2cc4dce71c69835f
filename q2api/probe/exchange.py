"""The probe's calls to Amazon Q for one account, through the gateway's own clients.

Generations go through `UpstreamClient` (q2api.amazonq.upstream) pinned to the host being probed;
the catalogue and credits through `ServiceApi`, profiles through `list_profiles`, web search through
`WebSearchClient.exchange` — each with the account's token manager, token type and proxy, so what the
probe sees is what the gateway would. Every call is counted against the run's budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import aiohttp

from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import token_type_of
from q2api.amazonq.errors import (
    HostUnreachable,
    RefreshRejected,
    RefreshUnavailable,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from q2api.amazonq.eventstream import EventStreamDecoder, EventStreamError
from q2api.amazonq.hosts import Host
from q2api.amazonq.profiles import Profile, list_profiles
from q2api.amazonq.service_api import Operation, ServiceApi
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.upstream import UpstreamClient, UpstreamConfig, UpstreamTrace
from q2api.amazonq.web_search import WebSearchClient
from q2api.probe.account_view import PinnedHosts, ProbeCredential, ProbePool
from q2api.probe.answers import ErrorShape, SearchShape, error_shape, search_shape
from q2api.probe.redaction import Redactor
from q2api.probe.shapes import ReplyContent, StreamReader, StreamShape
from q2api.probe.steps import RequestBudget

# How a call ended.
SERVED = "served"  # a 200 (a reply, an answer)
REFUSED = "refused"  # an error status: see the ErrorShape
UNREACHABLE = "unreachable"  # no connection could be opened
TIMEOUT = "timeout"
BROKEN = "broken"  # the connection failed after it was opened
NO_TOKEN = "no_token"  # the account's token could not be had (refresh refused or out of reach)


@dataclasses.dataclass
class Generation:
    outcome: str
    calls: int
    sent_bytes: int | None = None  # the size of the last body sent
    error: ErrorShape | None = None
    shape: StreamShape | None = None
    content: ReplyContent | None = None  # in memory only: never reported
    detail: str | None = None  # for a failure without an answer: its class, redacted text


@dataclasses.dataclass
class ServiceAnswer:
    outcome: str
    calls: int
    document: dict[str, Any] | None = None  # in memory only: the report keeps its shape
    error: ErrorShape | None = None
    detail: str | None = None


@dataclasses.dataclass
class ProfilesAnswer:
    outcome: str
    calls: int
    profiles: list[Profile] = dataclasses.field(default_factory=list)  # in memory only
    error: ErrorShape | None = None
    detail: str | None = None


@dataclasses.dataclass
class SearchAnswer:
    outcome: str
    calls: int
    shape: SearchShape | None = None
    detail: str | None = None


class ProbeUpstream:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        proxies: AccountProxies,
        credential: ProbeCredential,
        config: UpstreamConfig,
        redactor: Redactor,
        budget: RequestBudget,
        first_host: Host,
    ) -> None:
        self._session = session
        self._proxies = proxies
        self.credential = credential
        self.redactor = redactor
        self.budget = budget
        self.pool = ProbePool(credential)
        self.hosts = PinnedHosts(first_host)
        self._client = UpstreamClient(session, self.pool, config, hosts=self.hosts, proxies=proxies)
        self._timeout = config.connect_timeout + 20.0
        self._apis: dict[str, ServiceApi] = {}

    async def generate(
        self, host: Host, body: GenerateAssistantResponseRequest, *, with_profile: bool = True
    ) -> Generation:
        """One GenerateAssistantResponse on `host`, read to its end."""
        self.hosts.pin(host)
        self.credential.send_profile = with_profile
        trace = UpstreamTrace(keep_body=True)  # for the size of what was sent
        reader = StreamReader(self.redactor)
        try:
            async with self._client.open_stream(body, trace) as stream:
                decoder = EventStreamDecoder()
                fault = None
                try:
                    async for chunk in stream.chunks():
                        reader.add(decoder.feed(chunk))
                    decoder.close()
                except EventStreamError as exc:
                    fault = type(exc).__name__
                except UpstreamError as exc:  # timed out or broke mid-reply
                    fault = type(exc).__name__
                reader.finish(fault)
            generation = Generation(SERVED, 0, shape=reader.shape, content=reader.content)
            self.credential.proven = True
        except UpstreamHTTPError as error:
            generation = Generation(REFUSED, 0, error=error_shape(error, self.redactor))
        except UpstreamError as exc:
            generation = Generation(_failure_outcome(exc), 0, detail=self._detail(exc))
        finally:
            self.credential.send_profile = True
        generation.calls = len(trace.attempts)
        generation.sent_bytes = len(trace.sent_body) if trace.sent_body is not None else None
        trace.forget_body()
        self.budget.spend(generation.calls)
        return generation

    async def service(self, host: Host, operation: Operation, params: Mapping[str, str | int]) -> ServiceAnswer:
        """One catalogue or credits call (REST first, awsJson when the host knows only that: two calls)."""
        api = self._apis.get(host.url)
        if api is None:
            api = self._apis[host.url] = ServiceApi(
                self._session, host.url, timeout=self._timeout, proxies=self._proxies
            )
        flavour = api.flavour
        calls = 0
        try:
            token = await self.credential.access_token()
            calls = 1
            document = await api.call(
                operation,
                params,
                token,
                token_type=token_type_of(self.credential.auth_kind),
                proxy_url=self.credential.proxy_url,
            )
            answer = ServiceAnswer(SERVED, 0, document=document)
            self.credential.proven = True
        except UpstreamHTTPError as error:
            answer = ServiceAnswer(REFUSED, 0, error=error_shape(error, self.redactor))
        except UpstreamError as exc:
            answer = ServiceAnswer(_failure_outcome(exc), 0, detail=self._detail(exc))
        answer.calls = calls + (1 if calls and api.flavour is not flavour else 0)
        self.budget.spend(answer.calls)
        return answer

    def flavour(self, host: Host) -> str | None:
        """The wire flavour `host` answered the service calls in (rest or aws_json), once one was made."""
        api = self._apis.get(host.url)
        return api.flavour.value if api is not None else None

    async def profiles(self, url: str) -> ProfilesAnswer:
        """One page of ListAvailableProfiles from `url`, with the account's token and token type."""
        try:
            token = await self.credential.access_token()
        except UpstreamError as exc:
            return ProfilesAnswer(_failure_outcome(exc), 0, detail=self._detail(exc))
        self.budget.spend(1)
        try:
            profiles = await list_profiles(
                self._proxies,
                url,
                token,
                proxy_url=self.credential.proxy_url,
                timeout=self._timeout,
                token_type=token_type_of(self.credential.auth_kind),
                max_pages=1,
            )
        except UpstreamHTTPError as error:
            return ProfilesAnswer(REFUSED, 1, error=error_shape(error, self.redactor))
        except (TimeoutError, aiohttp.ClientError) as exc:
            return ProfilesAnswer(UNREACHABLE, 1, detail=type(exc).__name__)
        except ValueError as exc:
            return ProfilesAnswer(BROKEN, 1, detail=self.redactor.message(str(exc)))
        for profile in profiles:
            self.redactor.add_secret(profile.arn)
        self.credential.proven = True
        return ProfilesAnswer(SERVED, 1, profiles=profiles)

    async def search(self, host: Host, query: str) -> SearchAnswer:
        """One web search on `host`'s MCP endpoint (docs/protocol.md#web-search)."""
        client = WebSearchClient(
            self._session, self.pool, lambda _: host.url, timeout=self._timeout, proxies=self._proxies
        )
        try:
            exchange = await client.exchange(self.credential, query)
        except UpstreamError as exc:
            return SearchAnswer(_failure_outcome(exc), 0, detail=self._detail(exc))
        self.budget.spend(exchange.calls)
        shape = search_shape(exchange.status, exchange.body, self.redactor)
        outcome = SERVED if exchange.status == 200 else UNREACHABLE if exchange.status == 599 else REFUSED
        if outcome == SERVED:
            self.credential.proven = True
        return SearchAnswer(outcome, exchange.calls, shape)

    def _detail(self, error: BaseException) -> str:
        return f"{type(error).__name__}: {self.redactor.message(str(error)) or ''}".rstrip(": ")


def _failure_outcome(error: UpstreamError) -> str:
    if isinstance(error, HostUnreachable):
        return UNREACHABLE
    if isinstance(error, UpstreamTimeout):
        return TIMEOUT
    if isinstance(error, UpstreamUnavailable):
        return BROKEN
    if isinstance(error, RefreshRejected | RefreshUnavailable):
        return NO_TOKEN
    return BROKEN
