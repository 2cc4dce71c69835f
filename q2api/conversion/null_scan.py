"""Whether a JSON value holds a null anywhere: the exact answer, at C speed.

Amazon Q rejects `null` wherever it sits (PROTOCOL.md A2.1), so the order guard looks for one in
every converted body. Nulls can only sit in the structure (a dict's values, a list's items), never
inside a string, so the scan visits containers and never reads text: a 200 KB Claude Code body is
~850 containers and ~3,000 values.

The one trick, measured by `bench/bench_conversion.py` ("guards: validate_conversation"): the
containers are walked level by level with `gc.get_referents`, which lists the values of many dicts
and the items of many lists in one C call (it is the garbage collector's own traversal). On the
200 KB body that is ~30 µs, against ~100 µs for the same walk in Python and ~300 µs for encoding
the body and searching the bytes for null tokens. The traversal also reaches into anything else
that has references (a class instance reaches its class, then its module), so a level that holds
anything but plain JSON values is walked the plain way instead.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any

_NONE = type(None)
# Values the traversal handles: the two containers, and scalars, which it does not enter (they
# are not tracked by the collector). Subclasses (a StrEnum member, an OrderedDict) are not here.
_PLAIN_TYPES = frozenset({dict, list, str, int, float, bool, _NONE})
# Deeper than any body the converter builds (its documents stop at 128 levels); what is left past
# it goes to the plain walk, which stops at Python's recursion limit rather than loop for ever
# on a structure that contains itself.
_MAX_LEVELS = 512


def holds_null(value: Any) -> bool:
    """True when `value`, or any value inside its dicts, lists and tuples, is None (a None
    dict key counts too: no JSON encoder takes one)."""
    level = [value]
    for _ in range(_MAX_LEVELS):
        if not level:
            return False
        kinds = set(map(type, level))
        if _NONE in kinds:
            return True
        if not kinds <= _PLAIN_TYPES:
            if any(_walk_for_null(item) for item in level if type(item) not in _PLAIN_TYPES):
                return True
            level = [item for item in level if type(item) is dict or type(item) is list]
        level = gc.get_referents(*level)
    return any(_walk_for_null(item) for item in level)


def _walk_for_null(value: Any) -> bool:
    """The plain walk, for values that are not plain JSON (tuples, other mappings, str subclasses)."""
    if value is None:
        return True
    if isinstance(value, Mapping):
        return None in value or any(_walk_for_null(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_walk_for_null(item) for item in value)
    return False
