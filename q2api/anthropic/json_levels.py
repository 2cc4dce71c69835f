"""How deep a free-form JSON document nests: every door's check on the documents a client sends.

The depth of the free-form documents a client sends (`first_too_deep` below) is checked by
`q2api.anthropic.types` for the Claude door and by the OpenAI doors for their tool parameters,
tool-call arguments and response schemas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

# Free-form JSON a client sends that the gateway forwards or evaluates (tool inputs and schemas, tool-call
# arguments, response schemas) is wrapped a few levels deeper again on its way to Amazon Q; past 128
# levels no real document goes, and the encoders' and the schema validator's recursion limits are near.
MAX_JSON_DEPTH = 128
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"


def first_too_deep(documents: Sequence[Any]) -> int | None:
    """The index of the first of `documents` (decoded JSON values) nested deeper than MAX_JSON_DEPTH, or None.

    Door-independent: a door gathers a request's free-form documents and names the field of the one
    this returns.
    """
    for index, document in enumerate(documents):
        if _too_deep(document):
            return index
    return None


_encode = msgspec.json.Encoder().encode


def _too_deep(document: Any) -> bool:
    encoded = _encode(document)
    if encoded.count(b"{") + encoded.count(b"[") <= MAX_JSON_DEPTH:
        return False  # too few brackets to nest that deep (the common case, counted in C)
    # Walked iteratively: no Python recursion to exhaust.
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > MAX_JSON_DEPTH:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
