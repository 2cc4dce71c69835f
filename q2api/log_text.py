"""Client-supplied text made safe for a one-line-per-record text log.

A path, a model id, a tool id or an account label may hold a newline (`%0A`
in a URL decodes to one) or other control characters; printed raw, they would
start a forged log line, or drive the terminal that shows it (ESC sequences).
`one_line` escapes every character that can break or disguise a line — the C0
and C1 controls, DEL, the Unicode line and paragraph separators, and the
bidirectional controls that reorder what follows them on screen — as `\\n`,
`\\r`, `\\t` or `\\xNN` / `\\uNNNN`, and leaves everything else (other
non-ASCII text included) as it is. A backslash is doubled, so an escape the
client typed cannot pass for one the gateway made. The command line shows
stored text (labels, imported names) through it too.
"""

from __future__ import annotations

import re

# C0, DEL and C1 controls; line and paragraph separators; the bidirectional marks, embeddings,
# overrides and isolates (U+061C, U+200E-F, U+202A-E, U+2066-9); the backslash.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\\]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(value: object) -> str:
    """`value` as text that stays on one log line."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, text)
