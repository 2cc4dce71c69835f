"""Top-level request fields no OpenAI request type declares: named, then taken out.

The Chat Completions and Responses request types forbid unknown top-level fields, so the decoder
stops at one instead of dropping it unseen (a client newer than the gateway). Then, the rare path:
the body is read again as plain JSON, every key the type does not declare is removed and named,
and the rest is converted to the type as the decoder would have. The door reports the names.
"""

from __future__ import annotations

from typing import Any

import msgspec

UNKNOWN_FIELD = "Object contains unknown field"


def is_unknown_field(error: msgspec.ValidationError) -> bool:
    """The decoder stopped at a top-level field its type does not declare."""
    text = str(error)
    return text.startswith(UNKNOWN_FIELD) and " - at `$" not in text


def without_unknown_fields(body: bytes, request_type: type[Any]) -> tuple[Any, tuple[str, ...]]:
    """The body as `request_type`, its undeclared top-level fields removed; and their names. Raises
    msgspec's errors as decoding the body would."""
    document = msgspec.json.decode(body)
    if not isinstance(document, dict):
        return msgspec.convert(document, request_type), ()
    declared = {field.encode_name for field in msgspec.inspect.type_info(request_type).fields}  # type: ignore[attr-defined]
    unknown = tuple(key for key in document if key not in declared)
    for key in unknown:
        del document[key]
    return msgspec.convert(document, request_type), unknown
