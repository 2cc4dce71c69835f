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

from q2api.anthropic.events import WebSearchResult, WebSearchToolResultError

WEB_SEARCH = "web_search"


@dataclass(frozen=True, slots=True)
class ServerToolCall:
    """A server-tool call the model made in one upstream call."""

    id: str  # the client's id for it (srvtoolu_…)
    name: str  # the server tool (web_search)
    input: dict[str, Any]
    upstream_id: str  # Amazon Q's toolUseId: the tool result of the next upstream call answers it


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
