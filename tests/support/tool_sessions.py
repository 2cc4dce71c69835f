"""Agent sessions made of tool rounds, as Claude Code sends them: for the loop guard's tests.

    messages = session([SEED_ROUND] * 5)   # seed 003's loop: git diff, git status, git log, five times

A round is the tool calls of one assistant turn; each call carries the result the client sent back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from tests.support.converter_helpers import assistant, text, tool_result, tool_use, user


@dataclasses.dataclass(frozen=True)
class Call:
    name: str
    input: dict[str, Any]
    result: str = "ok"
    is_error: bool = False


Round = Sequence[Call]

OPENING = "Check whether index.html was committed."

# Seed 003: the model checks the same three things again and again, and gets the same answers.
SEED_ROUND: tuple[Call, ...] = (
    Call("Bash", {"command": "git diff"}, ""),
    Call("Bash", {"command": "git status"}, "On branch main\nnothing to commit, working tree clean"),
    Call("Bash", {"command": "git log -1 --oneline"}, "3f2a1c9 Add index.html"),
)


def session(
    rounds: Sequence[Round], *, opening: str = OPENING, after: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The Claude messages of a conversation: the opening question, then one assistant turn and one
    tool-result turn per round (tool ids unique across the session), then `after`."""
    messages = [user(opening)]
    number = 0
    for round_ in rounds:
        uses, results = [], []
        for call in round_:
            tool_id = f"toolu_{number:04d}"
            number += 1
            uses.append(tool_use(tool_id, call.name, call.input))
            results.append(tool_result(tool_id, call.result, True if call.is_error else None))
        messages.append(assistant([text("Let me check."), *uses]))
        messages.append(user(results))
    return [*messages, *after]
