"""The model catalogue as Codex reads it: `GET /v1/models?client_version=…` → `{"models": [ModelInfo]}`. Pure.

Codex asks its provider for `/models?client_version=<its version>` when its auth is a command or a
ChatGPT login (codex-rs `models-manager`; 0.171.0 measured: docs/clients.md), and reads `models`,
each entry a Codex `ModelInfo`. Without an entry for its model it says "Model metadata for … not
found", guesses a context window, and offers no `apply_patch` tool. With one it knows the
window, the reasoning levels, and offers `apply_patch` as a custom (freeform) tool, which the
Responses door carries (custom_tools.py).

An entry is built from the gateway's own list entry (`ModelRouter.entries`: the live
catalogue). Codex puts `base_instructions` first in every request as its developer message, in
place of its own prompt for OpenAI's models: the gateway's are below, written for a Claude
model driving Codex's tools; `model_instructions_file` in Codex's config replaces them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from q2api.frontdoors.openai_shared import THINKING_BUDGETS

CLIENT_VERSION_PARAM = "client_version"
# The levels Codex offers in its picker (the door maps each to a thinking budget), and its default.
REASONING_LEVELS = ("low", "medium", "high", "xhigh")
DEFAULT_REASONING_LEVEL = "medium"
_LEVEL_DESCRIPTIONS = {
    "low": "Quick answers, a short think first",
    "medium": "Thinks things through for everyday work",
    "high": "Thinks longer about hard problems",
    "xhigh": "The longest thinking, for the hardest problems",
}
# How much of a tool's output Codex keeps in the conversation (its own models' setting).
TRUNCATION_POLICY = {"mode": "tokens", "limit": 10_000}
BASE_INSTRUCTIONS = """\
You are a coding agent working in the user's terminal through the Codex CLI, on a Claude model \
served by q2api. Carry the user's task through to the end in the current workspace, then report \
what you did in a few plain sentences.

- Look before you change anything: read the files involved and run commands to check what you assume.
- Edit files with the `apply_patch` tool: its input is the patch itself, as free text in the format \
its description gives (`*** Begin Patch` … `*** End Patch`), never JSON and never a shell here-document.
- Run commands with the shell tool; search with `rg` where it exists.
- Keep each change to what the task needs; leave changes you did not make as they are.
- Check your work where you can (tests, a build, running the program) and say so when you could not.
- Ask the user only when you cannot go on without an answer; otherwise decide, and say what you decided.
"""


def codex_models(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each list entry (the anthropic SDK's `ModelInfo` shape) as a Codex `ModelInfo`, in list order."""
    return [_codex_model(entry, priority) for priority, entry in enumerate(entries, start=1)]


def _codex_model(entry: dict[str, Any], priority: int) -> dict[str, Any]:
    capabilities = entry.get("capabilities") or {}
    images = bool(capabilities.get("image_input", {}).get("supported"))
    info: dict[str, Any] = {
        "slug": entry["id"],
        "display_name": entry.get("display_name") or entry["id"],
        "description": f"{entry.get('display_name') or entry['id']} on Amazon Q, through q2api",
        "default_reasoning_level": DEFAULT_REASONING_LEVEL,
        "supported_reasoning_levels": [
            {"effort": level, "description": _LEVEL_DESCRIPTIONS[level]}
            for level in REASONING_LEVELS
            if level in THINKING_BUDGETS
        ],
        "shell_type": "shell_command",
        "visibility": "list",
        "supported_in_api": True,
        "priority": priority,
        "upgrade": None,
        "base_instructions": BASE_INSTRUCTIONS,
        "supports_reasoning_summaries": True,  # thinking comes back as reasoning summaries when asked
        "support_verbosity": False,  # `text.verbosity` has no Amazon Q counterpart
        "default_verbosity": None,
        "apply_patch_tool_type": "freeform",
        "truncation_policy": dict(TRUNCATION_POLICY),
        "supports_parallel_tool_calls": True,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"] if images else ["text"],
    }
    if entry.get("max_input_tokens"):
        info["context_window"] = entry["max_input_tokens"]
    return info
