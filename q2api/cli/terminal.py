"""Text from files and stores printed to a terminal without driving it.

What the command line prints from a capture (a client's model id, tool names, messages, an Amazon Q
error) is input like any other: raw, an ESC sequence in it would move the cursor, retitle the
window or hide the lines around it. `echo` prints like `print`, each line escaped as the log
escapes a value (q2api.log_text.one_line: controls as `\\xNN`, `\\uNNNN`), the line breaks kept.
"""

from __future__ import annotations

from typing import IO

from q2api.log_text import one_line


def terminal_text(text: str) -> str:
    """`text` with every control character but its line breaks escaped."""
    return "\n".join(one_line(line) for line in text.split("\n"))


def echo(*values: object, file: IO[str] | None = None) -> None:
    print(terminal_text(" ".join(map(str, values))), file=file)
