"""The Responses API's reply objects: the `response`, its `usage`, its output items, the stream events.

Plain dicts, exactly as they go on the wire (orjson writes them); built here so that the field
names live in one place. Each stream event also carries a `sequence_number`, given by whoever
writes the stream (it counts the events in order).
"""

from __future__ import annotations

from typing import Any, Literal

ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]
ItemStatus = Literal["in_progress", "completed", "incomplete", "failed"]  # "failed": a web search only


def usage(
    input_tokens: int, output_tokens: int, *, cached: int = 0, cache_write: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """OpenAI counts cached input inside `input_tokens`; the caller adds it."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def response(
    *,
    response_id: str,
    created_at: int,
    model: str,
    status: ResponseStatus,
    output: list[dict[str, Any]],
    echo: dict[str, Any],
    usage: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    completed_at: int | None = None,
) -> dict[str, Any]:
    """The `response` object; `echo` holds the request's settings it repeats (`instructions`, `tools`, …)."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "completed_at": completed_at,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "model": model,
        "output": output,
        "usage": usage,
        **echo,
    }


def message_item(item_id: str, status: ItemStatus, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def output_text(text: str, annotations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}


def url_citation(url: str, title: str, start_index: int, end_index: int) -> dict[str, Any]:
    """An `output_text` annotation (the SDK's `AnnotationURLCitation`): `text[start_index:end_index]` cites `url`."""
    return {"type": "url_citation", "url": url, "title": title, "start_index": start_index, "end_index": end_index}


def web_search_call_item(
    item_id: str, status: ItemStatus, *, query: str | None, sources: list[str] | None
) -> dict[str, Any]:
    """A `web_search_call` output item (the SDK's `ResponseFunctionWebSearch`, its action a `search`);
    `sources`: the result URLs, given only when the request included them."""
    action: dict[str, Any] = {"type": "search"}
    if query is not None:
        action["query"] = query
    if sources is not None:
        action["sources"] = [{"type": "url", "url": url} for url in sources]
    return {"id": item_id, "type": "web_search_call", "status": status, "action": action}


def function_call_item(
    item_id: str, status: ItemStatus, *, call_id: str, name: str, arguments: str, namespace: str | None
) -> dict[str, Any]:
    item = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def custom_tool_call_item(
    item_id: str, status: ItemStatus, *, call_id: str, name: str, input: str, namespace: str | None
) -> dict[str, Any]:
    """A `custom_tool_call` output item (the SDK's `ResponseCustomToolCall`): the input is one string."""
    item = {
        "id": item_id,
        "type": "custom_tool_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "input": input,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def reasoning_item(
    item_id: str,
    status: ItemStatus,
    *,
    summary: list[str],
    content: list[str] | None,
    encrypted_content: str | None,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "status": status,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if content is not None:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in content]
    item["encrypted_content"] = encrypted_content
    return item


def error_body(code: str, message: str) -> dict[str, Any]:
    """The `error` of a failed `response`."""
    return {"code": code, "message": message}


def deleted(response_id: str) -> dict[str, Any]:
    return {"id": response_id, "object": "response.deleted", "deleted": True}


def item_list(items: list[dict[str, Any]], *, has_more: bool) -> dict[str, Any]:
    """A page of `GET /v1/responses/{id}/input_items`."""
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }
