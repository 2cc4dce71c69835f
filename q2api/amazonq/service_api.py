"""The non-streaming CodeWhisperer calls beside chat: `ListAvailableModels` and `GetUsageLimits`.

Each exists in two wire flavours on the same host (docs/protocol.md#transport):

* REST — `GET {endpoint}/{operation}?origin=AI_EDITOR&…`, what Kiro clients send;
* awsJson 1.0 — `POST {endpoint}` with `X-Amz-Target: AmazonCodeWhispererService.{Operation}` and the
  same parameters as a JSON body, what the Q CLI sends.

`ServiceApi` tries REST first and switches to awsJson for good if the host does not know the REST
path (404 or `UnknownOperationException`): one host may serve only one of them.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from q2api.amazonq.account_access import Credential
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import API_KEY_AUTH, authorization_headers
from q2api.amazonq.errors import (
    TimeoutPhase,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
    parse_error_reply,
)
from q2api.amazonq.host_choice import HostChoice

ORIGIN = "AI_EDITOR"
REQUEST_ID_HEADER = "x-amzn-requestid"
_UNKNOWN_OPERATION = "UnknownOperationException"


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    rest_path: str
    target: str


LIST_AVAILABLE_MODELS = Operation("ListAvailableModels", "AmazonCodeWhispererService.ListAvailableModels")
GET_USAGE_LIMITS = Operation("getUsageLimits", "AmazonCodeWhispererService.GetUsageLimits")


class Flavour(enum.Enum):
    REST = "rest"
    AWS_JSON = "aws_json"


class ServiceApi:
    """Calls one CodeWhisperer endpoint with a bearer token; raises the `q2api.amazonq.errors` classes."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        endpoint: str,
        *,
        timeout: float = 15.0,
        proxies: AccountProxies | None = None,
    ) -> None:
        """`proxies`: `session` with its HTTP(S)_PROXY routes, and the sessions of accounts with a proxy of
        their own (the caller closes them)."""
        self._proxies = proxies or AccountProxies(session)
        self._endpoint = endpoint.rstrip("/")
        self.endpoint = self._endpoint  # the host's URL without its trailing slash
        self._timeout_seconds = timeout
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self.flavour = Flavour.REST  # until the host shows it speaks only awsJson

    async def call(
        self,
        operation: Operation,
        params: Mapping[str, str | int],
        token: str,
        *,
        token_type: str | None = None,
        proxy_url: str | None = None,
    ) -> dict[str, Any]:
        """The JSON answer of `operation`; `params` without None values.

        `token_type` is the account's (q2api.amazonq.bearer: API_KEY for a Kiro API key), `proxy_url` its own proxy.
        """
        caller = _Caller(token, token_type, proxy_url)
        if self.flavour is Flavour.REST:
            try:
                return await self._rest(operation, params, caller)
            except UpstreamHTTPError as error:
                if not _unknown_path(error):
                    raise
                self.flavour = Flavour.AWS_JSON
        return await self._aws_json(operation, params, caller)

    async def _rest(self, operation: Operation, params: Mapping[str, str | int], caller: _Caller) -> dict[str, Any]:
        query = {key: str(value) for key, value in params.items()}
        return await self._send("GET", f"{self._endpoint}/{operation.rest_path}", caller, params=query)

    async def _aws_json(self, operation: Operation, params: Mapping[str, str | int], caller: _Caller) -> dict[str, Any]:
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": operation.target}
        return await self._send("POST", self._endpoint + "/", caller, data=orjson.dumps(dict(params)), headers=headers)

    async def _send(
        self, method: str, url: str, caller: _Caller, *, headers: Mapping[str, str] | None = None, **options: Any
    ) -> dict[str, Any]:
        all_headers = {
            **(headers or {}),
            **authorization_headers(caller.token, caller.token_type),
            "Accept": "application/json",
        }
        session, route = self._proxies.route(caller.proxy_url, url)  # its own proxy, else HTTP(S)_PROXY
        try:
            async with session.request(
                method, url, headers=all_headers, timeout=self._timeout, **route, **options
            ) as response:
                body = await response.read()
                if response.status != 200:
                    request_id = response.headers.get(REQUEST_ID_HEADER)
                    raise parse_error_reply(response.status, response.headers, body, request_id)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamTimeout(TimeoutPhase.FIRST_BYTE, self._timeout_seconds) from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"cannot reach Amazon Q ({type(exc).__name__}: {exc})") from None
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise UpstreamUnavailable("Amazon Q answered with a body that is not JSON") from None
        if not isinstance(document, dict):
            raise UpstreamUnavailable("Amazon Q answered with JSON that is not an object")
        return document


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class _Caller:
    """Who makes a call: its token (a secret: no repr), how the token is sent, its own proxy."""

    token: str
    token_type: str | None
    proxy_url: str | None


def _unknown_path(error: UpstreamHTTPError) -> bool:
    return error.status in (404, 405) or error.code == _UNKNOWN_OPERATION


class ServiceApis:
    """A `ServiceApi` per host, each account's calls going to the host its chat goes to (the same
    choice, so its catalogue and credits follow its failovers). One per host: each learns its flavour."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        hosts: HostChoice,
        *,
        timeout: float = 15.0,
        proxies: AccountProxies | None = None,
    ) -> None:
        """`proxies`: the sessions of accounts with a proxy of their own (the caller closes them)."""
        self._session = session
        self._hosts = hosts
        self._timeout = timeout
        self._proxies = proxies or AccountProxies(session)
        self._apis: dict[str, ServiceApi] = {}

    def move_on(self, credential: Credential, api: ServiceApi, failure: BaseException) -> bool:
        """A Kiro API key's call through `api` failed with a host's answer (401, 403 or 404: that host does
        not serve the key, A8.3) or no connection: that host rests, as a chat's failover would rest it (one
        WARNING), and True when another host is next. Only for keys: a login's 403 on these calls can be
        the call's own (an IdC catalogue without a profile, A9), not the host's."""
        if credential.auth_kind != API_KEY_AUTH:
            return False
        if isinstance(failure, UpstreamHTTPError):
            if failure.status not in (401, 403, 404):
                return False
            reason = str(failure.status)
        elif isinstance(failure, UpstreamUnavailable):
            reason = "unreachable"
        else:
            return False
        hosts = self._hosts.hosts(credential)
        failed = next((host for host in hosts if host.url.rstrip("/") == api.endpoint), None)
        if failed is None:
            return False
        preferred = self._hosts.preferred(credential)
        if preferred != failed and not self._hosts.rests.is_resting(credential.account_id, preferred):
            return True  # another call moved the account on meanwhile: ask the host it moved to
        position = hosts.index(failed)
        if position + 1 >= len(hosts) or self._hosts.rests.is_resting(credential.account_id, failed):
            return False  # the last host, or every host already rested: its answer stands
        self._hosts.failed(credential, failed, hosts[position + 1], reason)
        return True

    def for_account(self, credential: Credential) -> ServiceApi:
        url = self._hosts.preferred(credential).url
        api = self._apis.get(url)
        if api is None:
            api = self._apis[url] = ServiceApi(self._session, url, timeout=self._timeout, proxies=self._proxies)
        return api
