"""What a model can do through this gateway: the `capabilities` of `GET /v1/models` and `/v1/models/{id}`.

The object the anthropic SDK's `ModelInfo.capabilities` describes (`ModelCapabilities`: every
key always present), answered for the model as the gateway serves it — from the live
catalogue where the model decides (image input, native reasoning and its effort levels), from
what the gateway itself does around Amazon Q elsewhere:

* thinking: every type the Claude door takes is served — natively where the catalogue says the
  model reasons, else by the `<thinking>` tag convention (docs/protocol.md#native-thinking);
* PDF input: a PDF travels as its text, extracted by the gateway (q2api.conversion.documents);
* server tools: web search runs on Kiro's search; code execution does not exist upstream;
* structured outputs and strict tools are emulated by the gateway (the schema told to the model, the
  reply checked, one repair turn: q2api.frontdoors.claude.output_check), and so are context editing
  and compaction (q2api.frontdoors.claude.context_editing, `compaction`);
* batches, citations and code execution: none.
"""

from __future__ import annotations

from typing import Any

from q2api.amazonq.catalogue import IMAGE
from q2api.amazonq.reasoning_fields import ReasoningFields

# Effort levels the anthropic SDK's `EffortCapability` names, in its order.
EFFORT_LEVELS = ("low", "medium", "high", "max", "xhigh")
# `output_config.format` and strict tools checked against their schema (the chat door's emulation).
STRUCTURED_OUTPUTS = True
_CONTEXT_STRATEGIES = ("clear_thinking_20251015", "clear_tool_uses_20250919", "compact_20260112")
# The `context_management.edits` strategies the gateway applies itself, by name.
CONTEXT_MANAGEMENT: frozenset[str] = frozenset(_CONTEXT_STRATEGIES)
# `thinking.type: "between_tools"`: the model's native interleaved or adaptive thinking, else the tag form.
BETWEEN_TOOLS = True


def _support(supported: bool) -> dict[str, bool]:
    return {"supported": supported}


def model_capabilities(input_types: frozenset[str], reasoning: ReasoningFields | None) -> dict[str, Any]:
    """`ModelCapabilities` of a model that reads `input_types` and reasons as `reasoning` says (None:
    the tag convention)."""
    efforts = set(reasoning.efforts) if reasoning is not None else set()
    return {
        "batch": _support(False),
        "citations": _support(False),
        "code_execution": _support(False),
        "context_management": {
            "supported": bool(CONTEXT_MANAGEMENT),
            **{strategy: _support(strategy in CONTEXT_MANAGEMENT) for strategy in _CONTEXT_STRATEGIES},
        },
        "effort": {"supported": bool(efforts), **{level: _support(level in efforts) for level in EFFORT_LEVELS}},
        "image_input": _support(IMAGE in input_types),
        "pdf_input": _support(True),
        "server_tools": {"supported": True, "web_search": _support(True), "code_execution": _support(False)},
        "structured_outputs": _support(STRUCTURED_OUTPUTS),
        "thinking": {
            "supported": True,
            "types": {
                "enabled": _support(True),
                "adaptive": _support(True),
                "disabled": _support(True),
                "between_tools": _support(BETWEEN_TOOLS),
            },
        },
    }
