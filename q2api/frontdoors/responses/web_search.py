"""OpenAI's hosted web search in the Responses door, the request side: onto the Claude door's web search. Pure.

Amazon Q runs no OpenAI tool, but the gateway searches the web for Claude requests that offer
Anthropic's web search tool (Kiro's MCP search, docs/protocol.md#web-search; the relay runs it,
q2api.conversion.web_search). So a Responses request's `web_search` / `web_search_preview` tool
(any dated spelling; the SDK's `WebSearchTool` and `WebSearchPreviewTool`) becomes that Claude
tool, as the chat door does with `web_search_options`:

* `filters.allowed_domains` → `allowed_domains` (results elsewhere are dropped, the model is told);
* `user_location` → `user_location` (the model is told where the user is);
* `search_context_size`, `search_content_types` and `external_web_access` are accepted and have no
  effect: Kiro's search has one size, finds pages (not images), and returns indexed results
  without fetching any page, which is what the cache-only mode (`external_web_access: false`)
  asks for as well.

A `web_search_call` item of the history (an earlier search the client was shown) goes back as the
Claude door's `server_tool_use` + `web_search_tool_result` blocks of the assistant turn, which the
converter carries as text: the model keeps what it searched and, when the client kept the sources
(`include: ["web_search_call.action.sources"]`), where it looked.
"""

from __future__ import annotations

import secrets
from typing import Any

from q2api.anthropic.types import ContentBlock, ServerToolUseBlock, Tool, ToolChoice, WebSearchToolResultBlock
from q2api.frontdoors.openai_shared import WEB_SEARCH_TOOL_TYPE
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.responses_types import WEB_SEARCH_TOOL_TYPES, WebSearchCallItem, WebSearchTool

WEB_SEARCH = "web_search"  # the Claude tool's name (Anthropic requires it) and the server tool it stands for
SOURCES_INCLUDE = "web_search_call.action.sources"  # the `include` value that adds the sources to the item


def claude_web_search_tool(tool: WebSearchTool) -> Tool:
    """The Claude door's web search tool for a Responses one (the relay checks the domains)."""
    location = tool.user_location
    user_location: dict[str, Any] | None = None
    if location is not None:
        fields = {"city": location.city, "region": location.region, "country": location.country}
        user_location = {"type": "approximate", **{key: value for key, value in fields.items() if value}}
        if location.timezone:
            user_location["timezone"] = location.timezone
    allowed = tool.filters.allowed_domains if tool.filters is not None else None
    return Tool(
        name=WEB_SEARCH, type=WEB_SEARCH_TOOL_TYPE, allowed_domains=allowed or None, user_location=user_location
    )


def web_search_origins(tool: WebSearchTool, claude_path: str, where: str) -> dict[str, str]:
    """Claude paths of the tool's options → the client's fields, for the relay's complaints about them."""
    origins = {claude_path: where}
    domains = tool.filters.allowed_domains if tool.filters is not None else None
    for number in range(len(domains or ())):
        origins[f"{claude_path}.allowed_domains.{number}"] = f"{where}.filters.allowed_domains[{number}]"
    return origins


def web_search_choice(choice_type: str, offered: bool, no_parallel: bool | None) -> ToolChoice | None:
    """`tool_choice: {"type": "web_search…"}` (a hosted tool by type) → the Claude choice of the search tool;
    None for another type."""
    if choice_type not in WEB_SEARCH_TOOL_TYPES:
        return None
    if not offered:
        raise InvalidChatRequest("tool_choice.type", f"{choice_type!r} names a tool the request does not offer")
    return ToolChoice(type="tool", name=WEB_SEARCH, disable_parallel_tool_use=no_parallel)


def history_blocks(item: WebSearchCallItem) -> list[ContentBlock]:
    """An earlier search as the Claude door's blocks: the call, and its result when the item says what it was."""
    action = item.action or {}
    query = action.get("query")
    if not isinstance(query, str):
        queries = action.get("queries")
        query = "; ".join(q for q in queries if isinstance(q, str)) if isinstance(queries, list) else None
    # The item's own id where it has one: the same history converts to the same request.
    call_id = f"srvtoolu_{item.id}" if item.id else "srvtoolu_" + secrets.token_hex(16)
    blocks: list[ContentBlock] = [
        ServerToolUseBlock(id=call_id, name=WEB_SEARCH, input={"query": query} if query else {})
    ]
    if item.status == "failed":
        error = {"type": "web_search_tool_result_error", "error_code": "unavailable"}
        blocks.append(WebSearchToolResultBlock(tool_use_id=call_id, content=error))
    else:
        sources = action.get("sources")
        urls = [source.get("url") for source in sources or () if isinstance(source, dict)]
        results = [{"type": "web_search_result", "url": url} for url in urls if isinstance(url, str)]
        if results:  # without sources the result is unknown, not empty: only the call is told
            blocks.append(WebSearchToolResultBlock(tool_use_id=call_id, content=results))
    return blocks
