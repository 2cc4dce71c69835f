"""Integers no encoder on the way can write, refused at every door with the field's path.

JSON has no limit on an integer's size and the parsers keep a Python `int` of any size, but
orjson, which writes the Amazon Q request, the stored Responses conversations and the replies,
takes 64-bit integers only ("Integer exceeds 64-bit range"). Such a number in a tool schema, a
`tool_use.input` or `max_output_tokens` was a 500 on every door — on `/v1/responses` after the
upstream call, so the credits were spent and the answer lost. The door refuses it before
anything else (each door words the 400 in its own envelope, naming the field).

    path = first_unwritable_integer(body)   # None, or ("tools", 0, "input_schema", "maximum")

The range is orjson's: from -2**63 to 2**64 - 1. A number outside it takes at least 19 digits in
a row, which a look at the bytes finds at C speed (~3 ms for a 1 MB body on the shared machine);
only a body that has such a run is parsed again as plain JSON and walked, to say where.
"""

from __future__ import annotations

from typing import Any

import msgspec

from q2api.anthropic.errors import InvalidRequest
from q2api.openai.errors import InvalidChatRequest

LOWEST_INTEGER = -(2**63)
HIGHEST_INTEGER = 2**64 - 1
OUT_OF_RANGE = f"integer out of range: the gateway takes integers from {LOWEST_INTEGER} to {HIGHEST_INTEGER}"

_SHORTEST_OUT_OF_RANGE = len(str(2**63))  # 19 digits: any integer outside the range has at least that many
_DIGITS_ONLY = bytes(ord("0") if ord("0") <= byte <= ord("9") else ord(" ") for byte in range(256))
_LONG_RUN = b"0" * _SHORTEST_OUT_OF_RANGE

Path = tuple[str | int, ...]


def first_unwritable_integer(body: bytes) -> Path | None:
    """The path of the first integer of the JSON `body` outside [LOWEST_INTEGER, HIGHEST_INTEGER], or None.

    A body that is not JSON is None here: the door's own parser says what is wrong with it."""
    if _LONG_RUN not in body.translate(_DIGITS_ONLY):
        return None
    try:
        try:
            document = msgspec.json.decode(body)
        except UnicodeDecodeError:
            # Invalid UTF-8 in a field the door's typed parser skipped (an unknown key of a nested
            # object is skipped unread): the numbers it kept are still to be checked. Replacing
            # the bytes changes the text of strings only, never the structure or a number.
            document = msgspec.json.decode(body.decode("utf-8", "replace"))
    except (msgspec.MsgspecError, RecursionError):
        return None  # not JSON the door keeps: its own parser said so, or skipped the part
    return _first_out_of_range(document)


def _first_out_of_range(document: Any) -> Path | None:
    # Walked iteratively, in document order: no Python recursion for a deep body to exhaust.
    pending: list[tuple[Any, Path]] = [(document, ())]
    while pending:
        value, path = pending.pop()
        if type(value) is int:
            if not LOWEST_INTEGER <= value <= HIGHEST_INTEGER:
                return path
        elif type(value) is dict:
            pending.extend((child, (*path, key)) for key, child in reversed(value.items()))
        elif type(value) is list:
            pending.extend((value[index], (*path, index)) for index in range(len(value) - 1, -1, -1))
    return None


def refuse_unwritable_integer(body: bytes) -> None:
    """The Claude door's 400 (InvalidRequest) naming the first integer out of range, if any."""
    path = first_unwritable_integer(body)
    if path is not None:
        raise InvalidRequest(dotted(path), OUT_OF_RANGE)


def refuse_unwritable_integer_openai(body: bytes) -> None:
    """The OpenAI doors' 400 (InvalidChatRequest) naming the first integer out of range, if any."""
    path = first_unwritable_integer(body)
    if path is not None:
        raise InvalidChatRequest(bracketed(path), OUT_OF_RANGE)


def dotted(path: Path) -> str:
    """The path as Anthropic names a field: `messages.1.content.0.input.a`."""
    return ".".join(map(str, path))


def bracketed(path: Path) -> str:
    """The path as OpenAI names a parameter: `messages[1].tool_calls[0].function`."""
    named = ""
    for step in path:
        named += f"[{step}]" if isinstance(step, int) else (f".{step}" if named else step)
    return named
