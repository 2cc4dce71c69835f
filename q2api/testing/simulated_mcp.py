"""The simulator's web search: Kiro's MCP `POST /mcp` `tools/call web_search` (docs/protocol.md#web-search).

Facts it follows: JSON-RPC 2.0 `{"id", "jsonrpc", "method": "tools/call", "params": {"name":
"web_search", "arguments": {"query"}}}`; the answer's `result.content[0].text` is a JSON string
`{"results": [{title, url, snippet, publishedDate (epoch ms), id, domain}], "totalResults",
"query"}`; a protocol error is a top-level `error: {code, message}`; a request without a profile
for a profile-bound account is refused; a bad token is the 403 "bearer token invalid".

Its own choices (not facts): `mode` picks the answer — `results` (three results made from the
query, deterministic), `empty` (no results), `rpc_error` (a JSON-RPC error), `tool_error`
(`isError: true`), `http_error` (HTTP 500); a query of 32 or more hexadecimal digits finds nothing,
answered as `nothing_found` says (from q2api.testing.assumptions); `results_by_query` overrides the results of given
queries; it accepts the profile in the body's root or in the `x-amzn-kiro-profile-arn` header
(the sources disagree on which the service reads), and requires one of them only when
`require_profile` is set; `delay` makes each search take that long.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Collection
from typing import Any

import orjson
from aiohttp import web

from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.simulated_services import bearer_of

PUBLISHED_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


# A query that is one run of this many hexadecimal digits or more finds nothing (the simulator's choice:
# `q2api probe` searches for 64 random ones to see what an empty search looks like).
_NOTHING_QUERY = re.compile(r"[0-9a-f]{32,}")


def search_results(
    query: str, count: int = 3, fields: tuple[str, ...] = SIMULATOR.names(assumptions.WEB_SEARCH_RESULT_FIELDS)
) -> list[dict[str, Any]]:
    """`count` results made from `query`, each with the `fields` q2api.testing.assumptions names."""
    slug = "-".join(query.lower().split())[:40] or "query"
    results = []
    for number in range(1, count + 1):
        result = {
            "title": f"{query} — result {number}",
            "url": f"https://example{number}.test/{slug}",
            "snippet": f"Snippet {number} about {query}.",
            "publishedDate": PUBLISHED_MS + number * 86_400_000,
            "id": f"sim-result-{number}",
            "domain": f"example{number}.test",
        }
        results.append({key: value for key, value in result.items() if key in fields})
    return results


class SimulatedMcp:
    def __init__(self, token_accepted: Callable[[str | None], bool], api_keys: Collection[str] = ()) -> None:
        self._token_accepted = token_accepted
        self._api_keys = api_keys
        self.mode = "results"
        # How a search that finds nothing is answered (q2api.testing.assumptions): `empty_results` (an empty
        # `results` list), `inner_error` (the inner JSON's `error` says so) or `tool_error` (`isError: true`).
        self.nothing_found = SIMULATOR.text(assumptions.WEB_SEARCH_NOTHING_FOUND)
        self.result_fields: tuple[str, ...] = SIMULATOR.names(assumptions.WEB_SEARCH_RESULT_FIELDS)
        self.results_by_query: dict[str, list[dict[str, Any]]] = {}
        self.require_profile = False
        self.delay = 0.0  # seconds each search takes
        self.cancelled = 0  # searches whose caller left before the answer
        self.requests: list[tuple[dict[str, str], Any]] = []  # (headers, body) of each call

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        headers = dict(request.headers)
        self.requests.append((headers, body))
        if self.delay:
            try:
                await asyncio.sleep(self.delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if not self._token_accepted(bearer_of(headers, self._api_keys)):
            reply = scripts.bearer_invalid()
            return web.Response(status=reply.status, body=reply.body, headers=dict(reply.headers))
        if not isinstance(body, dict) or body.get("method") != "tools/call":
            return _rpc_error(body, -32601, "Method not found")
        params = body.get("params") or {}
        if params.get("name") != "web_search":
            return _rpc_error(body, -32602, f"Unknown tool: {params.get('name')}")
        if self.require_profile and not (body.get("profileArn") or headers.get("x-amzn-kiro-profile-arn")):
            reply = scripts.profile_required()
            return web.Response(status=reply.status, body=reply.body, headers=dict(reply.headers))
        query = str((params.get("arguments") or {}).get("query", ""))
        if self.mode == "http_error":
            return web.json_response({"message": "Internal error"}, status=500)
        if self.mode == "rpc_error":
            return _rpc_error(body, -32000, "search backend unavailable")
        if self.mode == "tool_error":
            content = [{"type": "text", "text": "search failed"}]
            return web.json_response(
                {"id": body.get("id"), "jsonrpc": "2.0", "result": {"content": content, "isError": True}}
            )
        finds_nothing = self.mode == "empty" or bool(_NOTHING_QUERY.fullmatch(query.strip()))
        if finds_nothing and self.nothing_found == "tool_error":
            content = [{"type": "text", "text": "No results found."}]
            return web.json_response(
                {"id": body.get("id"), "jsonrpc": "2.0", "result": {"content": content, "isError": True}}
            )
        chosen = self.results_by_query.get(query)
        if finds_nothing:
            results: list[dict[str, Any]] = []
        else:
            results = chosen if chosen is not None else search_results(query, fields=self.result_fields)
        inner: dict[str, Any] = {"results": results, "totalResults": len(results), "query": query}
        if finds_nothing and self.nothing_found == "inner_error":
            inner["error"] = "No results found."
        answer = {
            "id": body.get("id"),
            "jsonrpc": "2.0",
            "result": {"content": [{"type": "text", "text": orjson.dumps(inner).decode()}], "isError": False},
        }
        return web.json_response(answer)

    @property
    def queries(self) -> list[str]:
        return [str(((body or {}).get("params") or {}).get("arguments", {}).get("query")) for _, body in self.requests]


def _rpc_error(body: Any, code: int, message: str) -> web.Response:
    request_id = body.get("id") if isinstance(body, dict) else None
    return web.json_response({"id": request_id, "jsonrpc": "2.0", "error": {"code": code, "message": message}})
