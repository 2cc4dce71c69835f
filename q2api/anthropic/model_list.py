"""`GET /v1/models`: the Anthropic list shape with `limit`, `after_id` and `before_id` paging, and
the entries of it and of `GET /v1/models/{id}` (the SDK's `ModelInfo`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from q2api.anthropic.errors import InvalidRequest

# Amazon Q publishes no release dates; the epoch is what the API docs say to use when unknown.
UNKNOWN_CREATED_AT = "1970-01-01T00:00:00Z"


def model_info(
    model_id: str,
    display_name: str,
    max_input_tokens: int | None = None,
    *,
    max_tokens: int | None = None,
    capabilities: dict[str, Any] | None = None,
    line: str | None = None,
    owned_by: str = "anthropic",
) -> dict[str, Any]:
    """One entry (`ModelInfo`): Anthropic's fields — `capabilities` as the SDK's `ModelCapabilities`,
    `line` its `ModelLine` (opus, sonnet, …; None for a model of none) — plus OpenAI's `object`,
    `created` and `owned_by`, so that both SDKs' `models.list()` and `models.retrieve()` read it."""
    info: dict[str, Any] = {
        "type": "model",
        "id": model_id,
        "display_name": display_name,
        "created_at": UNKNOWN_CREATED_AT,
        "lifecycle": "active",  # a model the catalogue lists is served; it says nothing of retirement
        "deprecated_at": None,
        "retires_at": None,
        "line": line,
        "object": "model",
        "created": 0,
        "owned_by": owned_by,
    }
    if max_input_tokens:
        info["max_input_tokens"] = max_input_tokens
    if max_tokens:
        info["max_tokens"] = max_tokens
    if capabilities is not None:
        info["capabilities"] = capabilities
    return info


def list_models_page(models: Sequence[dict[str, Any]], params: Mapping[str, str]) -> dict[str, Any]:
    limit_text = params.get("limit", "20")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
        raise InvalidRequest("limit", "must be an integer between 1 and 1000")
    limit = int(limit_text)
    ids = [model["id"] for model in models]
    after_id, before_id = params.get("after_id"), params.get("before_id")
    if after_id is not None:
        if after_id not in ids:
            raise InvalidRequest("after_id", f"unknown model id {after_id!r}")
        window = list(models[ids.index(after_id) + 1 :])
        page, has_more = window[:limit], len(window) > limit
    elif before_id is not None:
        if before_id not in ids:
            raise InvalidRequest("before_id", f"unknown model id {before_id!r}")
        window = list(models[: ids.index(before_id)])
        page, has_more = window[-limit:], len(window) > limit
    else:
        page, has_more = list(models[:limit]), len(models) > limit
    return {
        "data": page,
        "has_more": has_more,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
    }
