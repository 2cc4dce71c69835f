"""`POST /v1/messages`: the Anthropic Messages API, the pipeline's own language.

The door itself (`door`), and what it does before the pipeline sees a request: the field table
(`fields`) and its refusals and the billing line (`reading`), the request-level features of the
API the gateway emulates — system messages' own fields (`system_messages`), context editing
(`context_editing`), compaction (`compaction`) — and the reply checks of structured outputs and
strict tools (`output_check`).
"""

from q2api.frontdoors.claude.door import CLAUDE_DOOR, CLAUDE_SSE, ClaudeCall, ClaudeDoor

__all__ = ["CLAUDE_DOOR", "CLAUDE_SSE", "ClaudeCall", "ClaudeDoor"]
