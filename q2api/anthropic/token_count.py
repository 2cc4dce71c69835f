"""Offline token estimation for Claude requests and replies.

(First cut: a character-class heuristic. Calibration against a real Claude
tokenizer and the full request walk are still to come.)
"""

from __future__ import annotations


def estimate_text_tokens(text: str) -> int:
    """Tokens in `text`: ASCII at ~4 characters a token, other characters ~1 each."""
    if not text:
        return 0
    extra_bytes = len(text.encode("utf-8")) - len(text)
    non_ascii = extra_bytes // 2
    return max(1, round((len(text) - non_ascii) / 4 + non_ascii))
