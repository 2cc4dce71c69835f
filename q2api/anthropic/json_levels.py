"""Plain JSON values (dicts, lists, strings, numbers, booleans, None) walked level by level at C speed.

Two checks run on every request look at the structure of JSON values and never at their text:
the depth of the free-form documents a client sends (`q2api.anthropic.types`) and the nulls of
the converted Amazon Q body (`q2api.conversion.null_scan`). Walked in Python, a value costs ~30 ns;
a 200 KB Claude Code body holds ~3,000 of them in ~850 containers.

The trick, kept here and only here: `gc.get_referents` is the garbage collector's own traversal,
and one call lists the values of many dicts and the items of many lists at once; strings and
numbers have no referents, so they drop out of the next level by themselves. Measured by
`bench/bench_conversion.py` ("guards: validate_conversation" and "parse+validate only"): the
nulls of the 200 KB body in ~30 µs (~100 µs walked in Python, ~300 µs encoding the body and
searching the bytes), the depth of its 98 tool inputs and schemas in ~20 µs (~75 µs encoding
each one and counting brackets).

The traversal would follow anything else too — a class instance leads to its class, its module
and the whole program — so a level that holds any other type (a tuple, a StrEnum member, an
OrderedDict) ends the walk with `NotPlainJSON`, and the caller takes its plain Python walk.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

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
