"""The checks every front door runs on a JSON request body, whatever protocol it speaks.

Each door decodes a body into its own typed request and names a faulty field its own way
(`tools.0.input_schema` on the Claude door, `tools[0].function.parameters` on the OpenAI
doors), but two faults are the same on every door and are found the same way here:

* a body the decoder cannot read at all — not UTF-8, or nested past what it can recurse
  through: `decode_json` turns them into `UnreadableBody` (a 400 on every door, never the
  decoder's own exception, which no door would catch);
* free-form JSON the gateway forwards or evaluates (tool schemas and inputs, tool-call
  arguments, response schemas) nested past MAX_JSON_DEPTH, which the upstream encoders and
  the JSON-schema validator cannot recurse through: `first_too_deep` says which document of
  a request's list goes too deep, and the door names its field.

Imported by the protocol packages and the front doors alike: it imports nothing of theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from q2api.json_levels import NotPlainJSON, json_levels

# Past 128 levels no real schema or tool input goes, and the encoders' recursion limits are near
# (the Claude body is wrapped a few levels deeper again on its way to Amazon Q).
MAX_JSON_DEPTH = 128
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode


class UnreadableBody(Exception):
    """The body cannot be decoded at all; the message says why (there is no field to name)."""


def decode_json(decode: Callable[[bytes], T], body: bytes) -> T:
    """`decode(body)`, with the faults no door's own error mapping knows turned into UnreadableBody.

    The door's decoder still raises its own errors (msgspec's DecodeError, ValidationError) for the
    door to name the field.
    """
    try:
        return decode(body)
    except UnicodeDecodeError as exc:
        raise UnreadableBody(f"request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise UnreadableBody("request body is nested too deeply to parse") from None


def first_too_deep(documents: Sequence[Any]) -> int | None:
    """The index of the first of `documents` (decoded JSON values) nested deeper than MAX_JSON_DEPTH, or None.

    All of them are looked at at once, level by level (a Claude Code turn resends ~100 tool
    inputs and schemas). The levels past the last container hold only scalars, so that walk
    may count one level too many, never too few; the exact walk of each document then says
    which one, if any, goes too deep.
    """
    try:
        if all(depth <= MAX_JSON_DEPTH for depth, _ in enumerate(json_levels(list(documents)), start=1)):
            return None
    except NotPlainJSON:
        pass
    for index, document in enumerate(documents):
        if _too_deep(document):
            return index
    return None


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
