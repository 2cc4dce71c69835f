"""Where a Claude request puts its `cache_control` breakpoints (prompt caching).

The request parser (q2api.anthropic.types.parse_messages_request_with_breakpoints) takes the
breakpoints out of the request: their places are kept here, and the markers are cleared from
the blocks. Claude Code moves its last
breakpoint to the newest message on every turn, and the converter resumes a conversation where
its messages are equal (q2api.conversion.checkpoints): a block that differs only by its marker
must compare equal. A marker inside a `tool_result`'s content counts for that block.

Anthropic accepts at most four breakpoints per request and answers a fifth with a 400; so does
this gateway, with the same message.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class CacheBreakpoints:
    system: tuple[int, ...] = ()  # indices of the system blocks that carry one
    tools: tuple[int, ...] = ()  # indices of the tools that carry one
    messages: tuple[tuple[int, int], ...] = ()  # (message index, block index)

    def __bool__(self) -> bool:
        return bool(self.system or self.tools or self.messages)

    @property
    def count(self) -> int:
        return len(self.system) + len(self.tools) + len(self.messages)


NO_BREAKPOINTS = CacheBreakpoints()
