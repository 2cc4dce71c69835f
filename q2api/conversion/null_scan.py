"""Whether a JSON value holds a null anywhere: the exact answer, without reading any text.

Amazon Q rejects `null` wherever it sits (docs/protocol.md#json-encoding-rules), so the order guard looks for one in
every converted body. A null can only be a dict's value or a list's item, never part of a string,
so the scan visits the containers and never the text: the cost follows the shape of the body, not
its size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Deeper than any body the converter builds (its documents stop at 128 levels). A structure that
# contains itself would otherwise never run out of levels.
_MAX_LEVELS = 10_000


def holds_null(value: Any) -> bool:
    """True when `value`, or any value inside its dicts, lists and tuples, is None (a None
    dict key counts too: no JSON encoder takes one). Walked level by level: no Python recursion
    to exhaust; past _MAX_LEVELS levels (a structure that contains itself), RecursionError."""
    level = [value]
    for _ in range(_MAX_LEVELS):
        deeper: list[Any] = []
        for item in level:
            if type(item) is str:
                continue  # most of a body's values: a text cannot hold a null
            if item is None:
                return True
            if isinstance(item, Mapping):
                if None in item:
                    return True
                deeper.extend(item.values())
            elif isinstance(item, list | tuple):
                deeper.extend(item)
        if not deeper:
            return False
        level = deeper
    raise RecursionError(f"a value nested more than {_MAX_LEVELS} levels deep")
