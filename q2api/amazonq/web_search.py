"""Kiro's web search: the MCP `tools/call web_search` on an account's host (docs/protocol.md#web-search).

    outcome = await WebSearchClient(session, pool, host_of).search("python 3.14 release", account_id=…)
    outcome.results   # tuple of SearchResult (empty: the search found nothing), or None on failure
    outcome.error     # None, or why it failed, as an Anthropic `web_search_tool_result_error` code

Wire facts (all peer reports, docs/protocol.md#web-search):

* `POST <host>/mcp`, JSON-RPC 2.0: `{"id", "jsonrpc": "2.0", "method": "tools/call",
  "params": {"name": "web_search", "arguments": {"query": …}}}`; the id as Kiro clients make it,
  `web_search_tooluse_<22 alnum>_<epoch ms>_<8 lower alnum>` (KRS `websearch.rs::create_mcp_request`;
  the server does not check it).
* The profile: ⚠ sources disagree — the body's root `profileArn` (JW #254: "the query parameter
  does not work", JW PR #180) or the `x-amzn-kiro-profile-arn` header (KRS `decorate_mcp`, JW
  PR #237; "non-API-key accounts must send it or MCP answers 403"). Both are sent: each source
  saw its own form accepted, and neither reports the other being refused.
* Headers: bearer token, `Content-Type: application/json` (JW, KRS), `x-amzn-codewhisperer-optout`.
* Answer: `result.content[0].text` is a JSON *string* holding `{"results": [{title, url, snippet?,
  publishedDate? (epoch ms), id?, domain?, …}], "totalResults", "query", "error"?}`; a protocol
  error is a top-level `error: {code, message}`; `result.isError: true` is a failed call. No
  sample of "no results" was captured: an empty `results` list is taken as an empty search (KRS,
  JW), a non-empty inner `error` string as a failure (a TS gateway).

The host comes from `host_of(credential)`: the host the account's chat goes to
(q2api.server.wiring.web_searcher, HostChoice.preferred). A failure is an outcome, never an exception: the reply goes on with a
`web_search_tool_result_error` block.
"""

from __future__ import annotations

import enum
import random
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from loguru import logger

from q2api.amazonq.account_access import Credential, CredentialPool
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import authorization_headers, token_type_of
from q2api.amazonq.errors import UpstreamError, classify_failure

MCP_PATH = "mcp"
PROFILE_HEADER = "x-amzn-kiro-profile-arn"
_ALNUM = string.ascii_letters + string.digits
_LOWER_ALNUM = string.ascii_lowercase + string.digits


class SearchError(enum.StrEnum):
    """Why a search failed, as the Anthropic `web_search_tool_result_error.error_code` says it."""

    UNAVAILABLE = "unavailable"
    TOO_MANY_REQUESTS = "too_many_requests"
    INVALID_TOOL_INPUT = "invalid_tool_input"
    MAX_USES_EXCEEDED = "max_uses_exceeded"
    QUERY_TOO_LONG = "query_too_long"


@dataclass(frozen=True, slots=True)
class SearchResult:
    title: str
    url: str
    snippet: str = ""
    published_ms: int | None = None  # epoch milliseconds
    domain: str | None = None


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    results: tuple[SearchResult, ...] | None  # None: the search failed
    error: SearchError | None = None
    detail: str = ""  # for the log: what went wrong

    @classmethod
    def failed(cls, error: SearchError, detail: str) -> SearchOutcome:
        return cls(None, error, detail)


def mcp_request(query: str, profile_arn: str | None, *, now_ms: int | None = None) -> dict[str, Any]:
    """The JSON-RPC body of one search."""
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    tail = "".join(random.choices(_LOWER_ALNUM, k=8))
    body: dict[str, Any] = {
        "id": f"web_search_tooluse_{''.join(random.choices(_ALNUM, k=22))}_{stamp}_{tail}",
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "web_search", "arguments": {"query": query}},
    }
    if profile_arn:
        body["profileArn"] = profile_arn
    return body


def mcp_headers(token: str, profile_arn: str | None, token_type: str | None = None) -> dict[str, str]:
    """A Kiro API key sends its `tokentype` and no profile (docs/protocol.md#kiro-api-keys; a TS gateway's `kiroWebSearch`)."""
    headers = {
        **authorization_headers(token, token_type),
        "Content-Type": "application/json",
        "Accept": "application/json",
        "x-amzn-codewhisperer-optout": "true",
    }
    if profile_arn:
        headers[PROFILE_HEADER] = profile_arn
    return headers


def parse_mcp_answer(status: int, body: bytes) -> SearchOutcome:
    """The outcome of one MCP answer (pure)."""
    if status != 200:
        text = body[:500].decode("utf-8", "replace")
        kind = classify_failure(status, None, text, None)
        error = SearchError.TOO_MANY_REQUESTS if status == 429 or kind.value == "throttled" else SearchError.UNAVAILABLE
        return SearchOutcome.failed(error, f"HTTP {status}: {text}")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return SearchOutcome.failed(SearchError.UNAVAILABLE, "the answer is not JSON")
    if not isinstance(document, dict):
        return SearchOutcome.failed(SearchError.UNAVAILABLE, "the answer is not a JSON object")
    rpc_error = document.get("error")
    if rpc_error:
        detail = rpc_error.get("message") if isinstance(rpc_error, dict) else rpc_error
        return SearchOutcome.failed(SearchError.UNAVAILABLE, f"JSON-RPC error: {detail}")
    result = document.get("result")
    if not isinstance(result, dict):
        return SearchOutcome.failed(SearchError.UNAVAILABLE, "the answer has no result")
    content = result.get("content")
    first: dict[str, Any] = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
    if result.get("isError") is True:
        return SearchOutcome.failed(SearchError.UNAVAILABLE, f"the search tool failed: {first.get('text', '')!s:.300}")
    inner_text = first.get("text")
    if not isinstance(inner_text, str):
        return SearchOutcome.failed(SearchError.UNAVAILABLE, "the result holds no text")
    try:
        inner = orjson.loads(inner_text)
    except orjson.JSONDecodeError:
        return SearchOutcome.failed(SearchError.UNAVAILABLE, "the result text is not JSON")
    if not isinstance(inner, dict):
        return SearchOutcome.failed(SearchError.UNAVAILABLE, "the result text is not a JSON object")
    if isinstance(inner.get("error"), str) and inner["error"].strip():
        return SearchOutcome.failed(SearchError.UNAVAILABLE, f"the search failed: {inner['error']:.300}")
    results = []
    for entry in inner.get("results") or ():
        if not isinstance(entry, dict):
            continue
        title, url = entry.get("title"), entry.get("url")
        if not isinstance(url, str) or not url:
            continue
        published = entry.get("publishedDate")
        results.append(
            SearchResult(
                title=title if isinstance(title, str) and title else url,
                url=url,
                snippet=snippet if isinstance(snippet := entry.get("snippet"), str) else "",
                published_ms=int(published) if isinstance(published, int | float) and published > 0 else None,
                domain=domain if isinstance(domain := entry.get("domain"), str) else None,
            )
        )
    return SearchOutcome(tuple(results))


@dataclass(frozen=True, slots=True)
class McpExchange:
    status: int  # 599: the endpoint could not be reached
    body: bytes
    calls: int  # HTTP calls made (2 when a rejected token was refreshed and the call repeated)


class WebSearchClient:
    """Runs searches on the account that serves the reply (its token and profile)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        pool: CredentialPool,
        host_of: Callable[[Credential], str],
        *,
        timeout: float = 30.0,
        proxies: AccountProxies | None = None,
    ) -> None:
        self._proxies = proxies or AccountProxies(session)
        self._pool = pool
        self._host_of = host_of
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def search(self, query: str, *, account_id: str | None, model: str | None = None) -> SearchOutcome:
        """Search on `account_id` (the account serving the reply), else on the account the pool picks."""
        credential = self._pool.manager(account_id) if account_id else None
        if credential is None:
            credential = self._pool.pick(model=model)
        if credential is None:
            return SearchOutcome.failed(SearchError.UNAVAILABLE, "no account can search now")
        try:
            return await self._call(credential, query)
        except UpstreamError as exc:  # the token could not be had (refresh refused or unreachable)
            return SearchOutcome.failed(SearchError.UNAVAILABLE, str(exc))

    async def _call(self, credential: Credential, query: str) -> SearchOutcome:
        exchange = await self.exchange(credential, query)
        outcome = parse_mcp_answer(exchange.status, exchange.body)
        if outcome.error is not None:
            logger.bind(account=credential.label).warning(f"web search failed: {outcome.detail}")
        return outcome

    async def exchange(self, credential: Credential, query: str) -> McpExchange:
        """One search's answer as it came (status 599: no answer), and the calls it took.

        `search` reads it; `q2api probe` records its shape. Raises UpstreamError when no token can be had.
        """
        host = self._host_of(credential).rstrip("/")
        url = f"{host}/{MCP_PATH}"
        token_type = token_type_of(credential.auth_kind)
        profile_arn = None if token_type else credential.profile_arn
        body = orjson.dumps(mcp_request(query, profile_arn))
        token = await credential.access_token()
        status, answer = await self._post(url, body, mcp_headers(token, profile_arn, token_type), credential)
        calls = 1
        if status in (401, 403) and b"bearer token" in answer.lower():
            # Expired or revoked early, as on the chat call: refresh once and repeat once.
            token = await credential.refresh_after_rejection(token)
            status, answer = await self._post(url, body, mcp_headers(token, profile_arn, token_type), credential)
            calls = 2
        return McpExchange(status, answer, calls)

    async def _post(self, url: str, body: bytes, headers: dict[str, str], credential: Credential) -> tuple[int, bytes]:
        session, route = self._proxies.route(credential.proxy_url, url)
        try:
            async with session.post(url, data=body, headers=headers, timeout=self._timeout, **route) as response:
                return response.status, await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            return 599, f"cannot reach the search endpoint ({type(exc).__name__})".encode()
