"""Calls the gateway runs for the model (Anthropic's server tools; today web search), as reply blocks. Pure.

The model is offered a `web_search` tool (q2api.conversion.web_search); when it calls it, the
translator withholds the call from the client (it is not the client's tool) and records a
`ServerToolCall`. The server runs the search and the reply shows what the Anthropic API shows
(SDK 2.14 shapes, docs/protocol.md#web-search): a `server_tool_use` block `{id: "srvtoolu_…", name,
input}`, then a `web_search_tool_result` block `{tool_use_id, content}` whose content is a list of
`{"type": "web_search_result", "title", "url", "page_age"}` — or, when the search failed, the
error object `{"type": "web_search_tool_result_error", "error_code"}`.

The result objects carry no `encrypted_content`: Kiro's search returns plain snippets, there is
nothing encrypted to hand out, and inventing a field the client would send back as if it were
Anthropic's would be a lie (the SDKs build response objects without validating them, so a
missing field is safe; the snippets reach the model in the tool result, not the client).
`page_age` is the result's publication date as `Month D, YYYY` (KRS `websearch.rs` formats
Kiro's epoch milliseconds the same way), or null.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from q2api.anthropic.events import ServerToolUsage, WebSearchResult, WebSearchToolResultError

WEB_SEARCH = "web_search"


@dataclass(frozen=True, slots=True)
class ServerToolCall:
    """A server-tool call the model made in one upstream call."""

    id: str  # the client's id for it (srvtoolu_…)
    name: str  # the server tool (web_search)
    input: dict[str, Any]
    upstream_id: str  # Amazon Q's toolUseId: the tool result of the next upstream call answers it


class ServerToolCalls:
    """The server-tool calls of one reply: those the server is to run before the message goes on
    (`pending`, made in the current upstream call), the searches run (usage.server_tool_use) and the
    results shown, whose titles a later citation of the reply text names."""

    __slots__ = ("_titles", "offered", "pending", "web_search_requests")

    def __init__(self, offered: bool) -> None:
        self.offered = offered  # the request offers a server tool: the usage reports server_tool_use
        self.pending: list[ServerToolCall] = []
        self.web_search_requests = 0
        self._titles: dict[str, str] = {}  # url → title of a result shown

    def shown(self, content: list[WebSearchResult] | WebSearchToolResultError, *, searched: bool) -> None:
        """A `web_search_tool_result` went out; `searched`: a search was run for it."""
        if searched:
            self.web_search_requests += 1
        if isinstance(content, list):
            self._titles.update((result["url"], result["title"]) for result in content)

    def citation(self, url: str, cited_text: str) -> dict[str, Any]:
        """A citation of the reply text pointing at `url` (titled when a result shown had that url)."""
        return {
            "type": "web_search_result_location",
            "url": url,
            "title": self._titles.get(url),
            "cited_text": cited_text,
        }

    def usage(self) -> ServerToolUsage:
        return {"web_search_requests": self.web_search_requests, "web_fetch_requests": 0}


def new_call(name: str, tool_input: dict[str, Any], upstream_id: str | None = None) -> ServerToolCall:
    call_id = f"srvtoolu_{uuid.uuid4().hex}"
    return ServerToolCall(call_id, name, tool_input, upstream_id or f"tooluse_{call_id[9:]}")


def web_search_results(results: list[tuple[str, str, int | None]]) -> list[WebSearchResult]:
    """(title, url, published epoch ms) → the result objects of a `web_search_tool_result`."""
    return [
        {"type": "web_search_result", "title": title, "url": url, "page_age": page_age(ms)}
        for title, url, ms in results
    ]


def web_search_error(error_code: str) -> WebSearchToolResultError:
    return {"type": "web_search_tool_result_error", "error_code": error_code}


def page_age(published_ms: int | None) -> str | None:
    if published_ms is None:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(published_ms / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return f"{moment:%B} {moment.day}, {moment.year}"
