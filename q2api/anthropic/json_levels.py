"""Plain JSON values (dicts, lists, strings, numbers, booleans, None) walked level by level at C speed.

Two checks run on every request look at the structure of JSON values and never at their text:
the depth of the free-form documents a client sends (`first_too_deep` below: every door's check,
called by `q2api.anthropic.types` for the Claude door and by the OpenAI door for its tool
parameters, tool-call arguments and response schemas) and the nulls of the converted Amazon Q
body (`q2api.conversion.null_scan`). Walked in Python, a value costs ~30 ns;
a 200 KB Claude Code body holds ~3,000 of them in ~850 containers.

The trick, kept here and only here: `gc.get_referents` is the garbage collector's own traversal,
and one call lists the values of many dicts and the items of many lists at once; strings and
numbers have no referents, so they drop out of the next level by themselves. Measured by
`bench/bench_conversion.py` ("guards: validate_conversation" and "parse+validate only"): the
nulls of the 200 KB body in ~30 µs (~100 µs walked in Python, ~300 µs encoding the body and
searching the bytes), the depth of its 98 tool inputs and schemas in ~20 µs (~75 µs encoding
each one and counting brackets).
It pays its way (BENCHMARKS.md, "Optimisations"): without it, a session's next 1 MB Claude Code turn
costs the gateway ~19 % more instructions now that the order guard scans every turn whole (its null
scan of the 1 MB body: 0.31 ms with it, 1.73 ms walked in Python).

The traversal would follow anything else too — a class instance leads to its class, its module
and the whole program — so a level that holds any other type (a tuple, a StrEnum member, an
OrderedDict) ends the walk with `NotPlainJSON`, and the caller takes its plain Python walk.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

# Free-form JSON a client sends that the gateway forwards or evaluates (tool inputs and schemas, tool-call
# arguments, response schemas) is wrapped a few levels deeper again on its way to Amazon Q; past 128
# levels no real document goes, and the encoders' and the schema validator's recursion limits are near.
MAX_JSON_DEPTH = 128
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"
PLAIN_JSON_TYPES = frozenset({dict, list, str, int, float, bool, type(None)})


class NotPlainJSON(Exception):
    """A level held something other than plain JSON values."""


def json_levels(values: list[Any]) -> Iterator[set[type]]:
    """The types found on each level: `values` themselves, then the values inside their dicts and
    lists, and so on, until a level is empty (levels past the deepest container hold no types).
    Raises NotPlainJSON on a level that holds any other type."""
    level = values
    while level:
        kinds = set(map(type, level))
        if not kinds <= PLAIN_JSON_TYPES:
            raise NotPlainJSON
        yield kinds
        level = gc.get_referents(*level)


def first_too_deep(documents: Sequence[Any]) -> int | None:
    """The index of the first of `documents` (decoded JSON values) nested deeper than MAX_JSON_DEPTH, or None.

    Door-independent: a door gathers a request's free-form documents and names the field of the one
    this returns. All of them are looked at at once, level by level (a Claude Code turn resends ~100
    tool inputs and schemas); the levels past the last container hold only scalars, so that walk may
    count one level too many, never too few, and the exact walk of each document then says which
    one, if any, goes too deep.
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


_encode = msgspec.json.Encoder().encode


def _too_deep(document: Any) -> bool:
    try:
        encoded = _encode(document)
    except RecursionError:
        # Deeper than the encoder's own recursion limit (a tool call's `arguments` string may decode
        # to a document 1,000 levels deep): far past MAX_JSON_DEPTH, no need to count.
        return True
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
