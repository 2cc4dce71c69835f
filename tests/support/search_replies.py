"""The simulated model's side of a web search: it calls the `web_search` tool the gateway offers, then answers.

gw.sim.enqueue(search_call("python 3.14 release"), answer("It came out in October.", cite=url))
"""

from __future__ import annotations

from typing import Any

from q2api.testing import scripts


def search_call(query: str, tool_use_id: str = "tooluse_search_1", text_before: str | None = "Let me search.") -> Any:
    """A reply that calls the gateway's `web_search` tool with `query` (after `text_before`)."""
    return scripts.tool_reply("web_search", {"query": query}, tool_use_id=tool_use_id, text_before=text_before)


def answer(text: str, *, cite: str | None = None) -> Any:
    """The model's answer after the results; `cite`: a URL its text cites (Amazon Q's `citationEvent`,
    citing the first 20 characters)."""
    parts: list[Any] = [scripts.conversation_event(), scripts.text_events(text, 3)]
    if cite:
        parts.append(scripts.citation_event(cite, text[:20]))
    parts.append(scripts.usage_event(30, 12))
    return scripts.stream(*parts)
