"""How deep the free-form JSON of a Responses request may nest. Pure.

A tool's parameters and a call's arguments travel to Amazon Q, the `text.format` schema is
evaluated: past MAX_JSON_DEPTH (the Claude door's limit) the encoders' and the validator's
recursion runs out, so deeper documents are refused with a 400 naming their field.
"""

from __future__ import annotations

from typing import Any

import msgspec

from q2api.openai.errors import InvalidChatRequest

MAX_JSON_DEPTH = 128
_encode_json = msgspec.json.Encoder().encode


def refuse_too_deep(document: Any, param: str) -> None:
    """A 400 naming `param` when `document` nests deeper than MAX_JSON_DEPTH."""
    encoded = _encode_json(document)
    if encoded.count(b"{") + encoded.count(b"[") <= MAX_JSON_DEPTH:
        return  # too few brackets to nest that deep (the common case, counted in C)
    pending: list[tuple[Any, int]] = [(document, 1)]  # walked iteratively: no recursion to exhaust
    while pending:
        value, depth = pending.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if depth > MAX_JSON_DEPTH and children:
            raise InvalidChatRequest(param, f"nested more than {MAX_JSON_DEPTH} levels deep")
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
