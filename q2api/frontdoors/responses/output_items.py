"""The output items of a Responses reply: what the builder (q2api.frontdoors.responses.reply) keeps of
each while it is open, and each as the Responses API shows it (`item_object`)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from q2api.frontdoors.responses.custom_tools import InputStream
from q2api.frontdoors.responses.request import ReplyOptions
from q2api.frontdoors.responses.tools import ToolName
from q2api.openai import responses_shapes as shapes


class Kind(enum.Enum):
    MESSAGE = "message"
    REASONING = "reasoning"
    FUNCTION_CALL = "function_call"
    CUSTOM_TOOL_CALL = "custom_tool_call"
    WEB_SEARCH = "web_search_call"


@dataclass(slots=True)
class OpenItem:
    kind: Kind
    output_index: int
    item_id: str
    pieces: list[str] = field(default_factory=list)  # the text, thinking, arguments or search input so far
    call_id: str = ""  # a function call's id, or the Claude id of a web search call
    name: ToolName = field(default_factory=lambda: ToolName(""))
    signature: str | None = None
    part_open: bool = False  # a reasoning item's summary part or text part was added
    citations: list[dict[str, Any]] = field(default_factory=list)  # a message's Claude citations
    sources: list[str] = field(default_factory=list)  # a web search's result URLs
    custom_input: InputStream | None = None  # a custom tool call's input text, read from its JSON
    done: dict[str, Any] | None = None  # the finished item

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def item_object(item: OpenItem, options: ReplyOptions, status: shapes.ItemStatus = "in_progress") -> dict[str, Any]:
    """The item as the Responses API shows it: in progress (its text not yet), or finished with `status`."""
    finished = status != "in_progress"
    text = item.text if finished else ""
    if item.kind is Kind.MESSAGE:
        annotations = [url_citation(citation, text) for citation in item.citations]
        return shapes.message_item(item.item_id, status, [shapes.output_text(text, annotations)] if finished else [])
    if item.kind is Kind.WEB_SEARCH:
        sources = item.sources if options.search_sources and status == "completed" else None
        return shapes.web_search_call_item(item.item_id, status, query=search_query(item.text), sources=sources)
    if item.kind is Kind.REASONING:
        summaries = options.summaries
        has_text = finished and bool(item.pieces)
        return shapes.reasoning_item(
            item.item_id,
            status,
            summary=[text] if summaries and has_text else [],
            content=None if summaries else ([text] if has_text else []),
            encrypted_content=item.signature if options.encrypted_reasoning or item.pieces == [] else None,
        )
    if item.custom_input is not None:
        return shapes.custom_tool_call_item(
            item.item_id,
            status,
            call_id=item.call_id,
            name=item.name.name,
            input=(item.custom_input.input or "") if finished else "",
            namespace=item.name.namespace,
        )
    return shapes.function_call_item(
        item.item_id,
        status,
        call_id=item.call_id,
        name=item.name.name,
        arguments=text,
        namespace=item.name.namespace,
    )


def reasoning_share(items: Sequence[OpenItem], output_tokens: int) -> int:
    """Amazon Q counts output tokens as one number: the reasoning part is its share of the characters."""
    sizes = dict.fromkeys(Kind, 0)
    for item in items:
        sizes[item.kind] += sum(len(piece) for piece in item.pieces)
    sizes[Kind.WEB_SEARCH] = 0  # a search's input comes from the model, but not from its reasoning
    total = sum(sizes.values())
    return round(output_tokens * sizes[Kind.REASONING] / total) if total else 0


def search_query(input_json: str) -> str | None:
    try:
        value = orjson.loads(input_json) if input_json else None
    except orjson.JSONDecodeError:
        return None
    query = value.get("query") if isinstance(value, dict) else None
    return query if isinstance(query, str) else None


def url_citation(citation: dict[str, Any], text: str) -> dict[str, Any]:
    """A Claude citation (`web_search_result_location`) as the `url_citation` of the text it belongs to."""
    url = str(citation.get("url") or "")
    cited = citation.get("cited_text") or ""
    start = text.find(cited) if isinstance(cited, str) and cited else -1
    start, end = (start, start + len(cited)) if start >= 0 else (0, len(text))
    return shapes.url_citation(url, str(citation.get("title") or url), start, end)
