"""How deep the free-form JSON of a Responses request may nest: every door's limit. Pure.

A tool's parameters travel to Amazon Q and the `text.format` schema is evaluated: past
MAX_JSON_DEPTH the encoders' and the validator's recursion runs out, so a deeper document is
refused with a 400 naming its field (function-call arguments are checked where they are read,
`arguments_object`).
"""

from __future__ import annotations

from typing import Any

from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep
from q2api.openai.errors import InvalidChatRequest


def refuse_too_deep(document: Any, param: str) -> None:
    """A 400 naming `param` when `document` nests deeper than the limit."""
    if first_too_deep([document]) is not None:
        raise InvalidChatRequest(param, TOO_DEEP)
