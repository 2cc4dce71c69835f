"""The reply objects: `chat.completion`, `chat.completion.chunk` and their `usage`.

Plain dicts, exactly as they go on the wire (orjson writes them); built here so the
field names live in one place.
"""

from __future__ import annotations

from typing import Any, Literal

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def completion(
    *,
    completion_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    finish_reason: FinishReason,
    usage: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": usage,
    }


def chunk(
    *,
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    finish_reason: FinishReason | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One stream chunk; `delta=None` makes the usage chunk (no choices), as OpenAI sends it last."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def model_entry_fields(owned_by: str, created: int = 0) -> dict[str, Any]:
    """What the OpenAI SDKs read of a `GET /v1/models` entry besides `id` (0: release date unknown)."""
    return {"object": "model", "created": created, "owned_by": owned_by}


def model_list(page: dict[str, Any], owned_by: str) -> dict[str, Any]:
    """A model list page (any shape with `data`) with what the OpenAI SDKs' `models.list()` reads."""
    fields = model_entry_fields(owned_by)
    return {"object": "list", **page, "data": [{**fields, **entry} for entry in page["data"]]}
