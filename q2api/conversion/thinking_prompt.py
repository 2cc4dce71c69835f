"""Extended thinking. Amazon Q has no thinking field; Kiro models follow a text convention:
a `<thinking_mode>` hint in the prompt turns it on, and reasoning comes back (and is shown in
history) as `<thinking>…</thinking>` text."""

from __future__ import annotations

from q2api.anthropic.types import ThinkingConfig

HINT_MARKER = "<thinking_mode>"


def thinking_hint(config: ThinkingConfig | None, default_budget: int) -> str | None:
    if config is None or not config.enabled:
        return None
    budget = config.budget_tokens or default_budget
    return f"<thinking_mode>enabled</thinking_mode><max_thinking_length>{budget}</max_thinking_length>"


def with_hint(content: str, hint: str | None) -> tuple[str, bool]:
    """`content` with the hint in front, unless it already carries one (never twice)."""
    if hint is None or HINT_MARKER in content:
        return content, False
    return f"{hint}\n{content}", True


def thinking_as_text(thinking: str) -> str:
    return f"<thinking>{thinking}</thinking>"
