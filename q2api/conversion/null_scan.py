"""Whether a JSON value holds a null anywhere: the exact answer, without reading any text.

Amazon Q rejects `null` wherever it sits (docs/protocol.md#json-encoding-rules), so the order guard looks for one in
every converted body. A null can only be a dict's value or a list's item, never part of a string,
so the scan visits the containers level by level (`q2api.anthropic.json_levels`, at C speed) and never the
text: the cost follows the shape of the body, not its size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from q2api.anthropic.json_levels import NotPlainJSON, json_levels

_NONE = type(None)
# Deeper than any body the converter builds (its documents stop at 128 levels). A structure that
# contains itself would otherwise never run out of levels; past this, it meets the plain walk,
# which stops at Python's recursion limit.
_MAX_LEVELS = 10_000


def holds_null(value: Any) -> bool:
    """True when `value`, or any value inside its dicts, lists and tuples, is None (a None
    dict key counts too: no JSON encoder takes one)."""
    try:
        for depth, kinds in enumerate(json_levels([value])):
            if _NONE in kinds:
                return True
            if depth == _MAX_LEVELS:
                break
        else:
            return False
    except NotPlainJSON:
        pass
    return _walk_for_null(value)


def _walk_for_null(value: Any) -> bool:
    """The plain walk, for values that are not plain JSON (tuples, other mappings, str subclasses)."""
    if value is None:
        return True
    if isinstance(value, Mapping):
        return None in value or any(_walk_for_null(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_walk_for_null(item) for item in value)
    return False
