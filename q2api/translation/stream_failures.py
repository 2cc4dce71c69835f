"""Failures inside a 200 event stream → the AnthropicError the client must see.

An `exception` frame carries the exception name in `:exception-type` and a
JSON payload (`message`, `reason`, maybe `__type`/`code`); an `error` frame
carries `:error-code`/`:error-message` headers and no payload (PROTOCOL.md
A4.2, B3). Both are classified by `map_upstream_error` with `status=None`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from q2api.amazonq.errors import sanitize_error_code
from q2api.anthropic.errors import AnthropicError
from q2api.translation.error_mapping import map_upstream_error

if TYPE_CHECKING:
    from q2api.amazonq.eventstream import Frame

# The one modelled stream error member, `error`, is an InternalServerException (A4.2).
_MODELLED_ERROR = "InternalServerException"


def in_stream_failure(frame: Frame, *, input_tokens: int, context_window: int) -> AnthropicError:
    """The error for an `exception` or `error` frame."""
    if frame.message_type == "error":
        code = frame.error_code
        message = frame.error_message
        payload: Mapping[str, Any] = {}
        code = code if type(code) is str and code else _MODELLED_ERROR
        message = message if type(message) is str else ""
    else:
        payload = _payload_object(frame.payload)
        exception_type = frame.exception_type
        named = exception_type if type(exception_type) is str and exception_type not in ("", "error") else None
        code = named or _first_str(payload, "__type", "code") or _MODELLED_ERROR
        message = _first_str(payload, "message", "Message", "errorMessage") or ""
    reason = payload.get("reason")
    return map_upstream_error(
        status=None,
        code=sanitize_error_code(code),
        message=message,
        reason=reason if type(reason) is str else None,
        input_tokens=input_tokens,
        context_window=context_window,
    )


def bad_payload(event_type: object, problem: str) -> AnthropicError:
    message = f"Amazon Q sent a {event_type} event whose payload {problem}"
    return AnthropicError(500, message, error_type="api_error")


def _payload_object(raw: bytes) -> Mapping[str, Any]:
    if not raw:
        return {}
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw.decode("utf-8", "replace")[:500]}
    return payload if type(payload) is dict else {}


def _first_str(payload: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = payload.get(key)
        if type(value) is str and value:
            return value
    return None
