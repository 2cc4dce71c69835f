"""Anthropic's web search server tool on Amazon Q (docs/protocol.md#web-search), the request side. Pure.

Amazon Q cannot run Anthropic's server tools, but Kiro can search the web (its MCP
`web_search`, q2api.amazonq.web_search). So a request that offers `web_search_20250305` (or a
dated successor) offers the model an ordinary tool named `web_search`; when the model calls it,
the server runs the search, shows the client `server_tool_use` + `web_search_tool_result` blocks
(q2api.translation.server_tools), and continues the model's turn with the results in a further
upstream call of the same reply (`continued_after_search`). The request's options:

* `max_uses`: searches per request; one more call is answered with `max_uses_exceeded`;
* `allowed_domains` / `blocked_domains` (one or the other, as at Anthropic): the search has no
  such parameter, so results outside them are dropped before anyone sees them, and the model is
  told the rule in the tool's description;
* `user_location`: the search has no location parameter either; the model is told where the
  user is, so that it can put the place into its queries.

Claude Code's WebSearch tool sends a request of its own whose only tool is the web search and
whose message asks for one query (`Perform a web search for the query: …`, KRS
`websearch.rs::extract_search_query`); `requested_search` finds that query so the search runs
at once, without a model call to decide it.

A history that holds earlier `server_tool_use` / `web_search_tool_result` blocks (the client sends
back what it was shown) travels to Amazon Q as text of the assistant turn (`server_block_text`):
the model keeps what it searched and found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from q2api.amazonq import types as q
from q2api.amazonq.types import ChatMessage, GenerateAssistantResponseRequest, ReasoningContent, ToolResult
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import (
    MessagesRequest,
    ServerToolUseBlock,
    TextBlock,
    Tool,
    WebSearchToolResultBlock,
)

WEB_SEARCH_TOOL = "web_search"  # the Amazon Q tool the model calls (and Anthropic's server tool name)
CLAUDE_CODE_QUERY_PREFIX = "Perform a web search for the query: "
MAX_QUERY_CHARS = 1_000  # a longer query is answered with `query_too_long` (no source gives Kiro's limit)
_DESCRIPTION = (
    "Search the web for current information: news, documentation, releases, facts after your "
    "training data. Returns result titles, URLs, publication dates and snippets. Write a focused "
    "query; search again with a refined query if the results do not answer the question. Cite "
    "the URLs you use."
)
_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The search query", "minLength": 2}},
    "required": ["query"],
}


@dataclass(frozen=True, slots=True)
class WebSearchOptions:
    name: str  # the client's name for the tool (Anthropic requires `web_search`)
    max_uses: int | None = None
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    user_location: dict[str, Any] | None = None

    def allows(self, url: str) -> bool:
        """Whether a result at `url` may be shown (a domain rule covers its subdomains)."""
        host = (urlsplit(url).hostname or "").lower()
        if self.allowed_domains:
            return any(_within(host, domain) for domain in self.allowed_domains)
        return not any(_within(host, domain) for domain in self.blocked_domains)


def web_search_options(request: MessagesRequest) -> WebSearchOptions | None:
    """The request's web search tool, checked as the Anthropic API checks it; None when it offers none."""
    tools = request.tools or []
    found = [(index, tool) for index, tool in enumerate(tools) if tool.is_web_search]
    if not found:
        return None
    index, tool = found[0]
    path = f"tools.{index}"
    if len(found) > 1:
        raise InvalidRequest(f"tools.{found[1][0]}", "only one web search tool may be offered")
    if any(other.name == tool.name for other in tools if other is not tool):
        raise InvalidRequest(f"{path}.name", f"tool names must be unique: {tool.name!r} is used twice")
    if tool.max_uses is not None and tool.max_uses < 1:
        raise InvalidRequest(f"{path}.max_uses", "must be at least 1")
    if tool.allowed_domains and tool.blocked_domains:
        raise InvalidRequest(path, "allowed_domains and blocked_domains cannot both be set")
    for field, domains in (("allowed_domains", tool.allowed_domains), ("blocked_domains", tool.blocked_domains)):
        for position, domain in enumerate(domains or ()):
            if not _domain(domain):
                raise InvalidRequest(f"{path}.{field}.{position}", f"{domain!r} is not a domain name")
    return options_of(tool)


def options_of(tool: Tool) -> WebSearchOptions:
    """The options of a web search tool, as given (`web_search_options` checks them)."""
    return WebSearchOptions(
        name=tool.name,
        max_uses=tool.max_uses,
        allowed_domains=tuple(filter(None, (_domain(domain) for domain in tool.allowed_domains or ()))),
        blocked_domains=tuple(filter(None, (_domain(domain) for domain in tool.blocked_domains or ()))),
        user_location=dict(tool.user_location) if tool.user_location else None,
    )


def web_search_spec(options: WebSearchOptions) -> q.Tool:
    """The Amazon Q tool the model is offered in place of Anthropic's server tool."""
    description = _DESCRIPTION
    if options.allowed_domains:
        description += f" Only results from these domains are returned: {', '.join(options.allowed_domains)}."
    if options.blocked_domains:
        description += f" Results from these domains are never returned: {', '.join(options.blocked_domains)}."
    place = _place(options.user_location)
    if place:
        description += f" The user is located in {place}; consider it for local questions."
    return {
        "toolSpecification": {"name": WEB_SEARCH_TOOL, "description": description, "inputSchema": {"json": _SCHEMA}}
    }


def requested_search(request: MessagesRequest, options: WebSearchOptions | None) -> str | None:
    """The query of a request that only asks for a search (Claude Code's WebSearch tool), else None."""
    if options is None or len(request.tools or ()) != 1 or request.messages[-1].role != "user":
        return None
    content = request.messages[-1].content
    text = (
        content if isinstance(content, str) else next((b.text for b in content or () if isinstance(b, TextBlock)), "")
    )
    if not text.startswith(CLAUDE_CODE_QUERY_PREFIX):
        return None
    query = text[len(CLAUDE_CODE_QUERY_PREFIX) :].strip()
    return query or None


def server_block_text(block: Any) -> str | None:
    """An earlier web search block of the history as context text; None for other server blocks."""
    if isinstance(block, ServerToolUseBlock) and block.name == WEB_SEARCH_TOOL:
        query = (block.input or {}).get("query")
        return f"[I searched the web for: {query}]" if isinstance(query, str) else "[I searched the web.]"
    if isinstance(block, WebSearchToolResultBlock):
        content = block.content
        if isinstance(content, dict):
            return f"[The web search failed: {content.get('error_code', 'unknown error')}]"
        lines = [
            f"- {item.get('title') or item.get('url')} <{item.get('url')}>"
            + (f" ({item['page_age']})" if item.get("page_age") else "")
            for item in content or ()
            if isinstance(item, dict) and item.get("url")
        ]
        return "[Web search results:\n" + "\n".join(lines) + "]" if lines else "[The web search found nothing.]"
    return None


def search_result_text(query: str, results: list[tuple[str, str, str, str | None]]) -> str:
    """What the model reads as the tool result: (title, url, snippet, page age) of each result."""
    if not results:
        return f'The web search for "{query}" found no results.'
    parts = [f'Web search results for "{query}":']
    for number, (title, url, snippet, age) in enumerate(results, start=1):
        part = f"{number}. {title}\n   URL: {url}"
        if age:
            part += f"\n   Published: {age}"
        if snippet:
            part += f"\n   {snippet}"
        parts.append(part)
    return "\n\n".join(parts)


@dataclass(frozen=True, slots=True)
class SearchRound:
    """What one upstream call produced before the server ran its searches."""

    text: str  # the assistant's text of that call
    reasoning: ReasoningContent | None  # its signed thinking, for a model that reasons natively
    calls: tuple[tuple[str, dict[str, Any]], ...]  # (Amazon Q toolUseId, input) of each search call
    results: tuple[tuple[str, bool], ...]  # (tool result text, is an error) answering each call


def continued_after_search(
    payload: GenerateAssistantResponseRequest, done: SearchRound
) -> GenerateAssistantResponseRequest:
    """The next upstream call of a reply: the conversation so far, the model's search calls as its
    turn, and their results as the new current message (with the same tools and model)."""
    state = payload["conversationState"]
    current = state["currentMessage"]["userInputMessage"]
    earlier: dict[str, Any] = {key: value for key, value in current.items() if key not in ("modelId", "cachePoint")}
    context = dict(earlier.get("userInputMessageContext") or {})
    tools = context.pop("tools", None)
    if context:
        earlier["userInputMessageContext"] = context
    else:
        earlier.pop("userInputMessageContext", None)
    assistant: dict[str, Any] = {
        "content": done.text,
        "toolUses": [
            {"toolUseId": tool_id, "name": WEB_SEARCH_TOOL, "input": tool_input} for tool_id, tool_input in done.calls
        ],
    }
    if done.reasoning is not None:
        assistant["reasoningContent"] = done.reasoning
    results: list[ToolResult] = [
        {"toolUseId": tool_id, "content": [{"text": text}], "status": "error" if failed else "success"}
        for (tool_id, _), (text, failed) in zip(done.calls, done.results, strict=True)
    ]
    next_context: dict[str, Any] = {"toolResults": results}
    if tools:
        next_context["tools"] = tools
    next_current: dict[str, Any] = {
        "content": "(Web search results are attached.)",
        "userInputMessageContext": next_context,
    }
    if "origin" in current:
        next_current["origin"] = current["origin"]
    if "modelId" in current:
        next_current["modelId"] = current["modelId"]
    history: list[ChatMessage] = [
        *state.get("history", ()),
        cast(ChatMessage, {"userInputMessage": earlier}),
        cast(ChatMessage, {"assistantResponseMessage": assistant}),
    ]
    new_state = {**state, "history": history, "currentMessage": {"userInputMessage": next_current}}
    return cast(GenerateAssistantResponseRequest, {**payload, "conversationState": new_state})


def _domain(value: str) -> str:
    value = value.strip().lower()
    if "://" in value:
        value = urlsplit(value).hostname or ""
    value = value.split("/")[0].lstrip(".")
    return value if "." in value and " " not in value else ""


def _within(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def _place(location: dict[str, Any] | None) -> str:
    if not location:
        return ""
    parts = [str(location[key]) for key in ("city", "region", "country") if isinstance(location.get(key), str)]
    text = ", ".join(parts)
    timezone = location.get("timezone")
    return f"{text} (time zone {timezone})" if text and isinstance(timezone, str) else text
