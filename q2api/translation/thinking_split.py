"""Split `<thinking>…</thinking>` out of streamed reply text.

Kiro-style prompting makes the model write its reasoning inline as
``<thinking>…</thinking>`` before the answer. The splitter turns a stream of
text chunks into TEXT / THINKING segments, and the result never depends on
the chunking: a tag cut across chunks is recognised because the only text held
back is a suffix that could still matter — a partial tag (with the blanks
that indent it), the blanks that start a line, or a backtick run that may
grow into a fence.

When a tag counts (the rule, chosen to avoid false positives):

* ``<thinking>`` opens a thinking block only at the start of a line — the
  start of the reply, or after a newline — with nothing but spaces/tabs
  before it on that line, and only outside markdown code: not inside a
  fenced block (a line starting with ≥3 backticks opens it, a line starting
  with at least as many closes it) and not inside an inline code span (a run
  of N backticks up to the next run of N backticks or the end of the line).
  So a reply that *talks about* the tag — ``use `<thinking>` tags`` or a
  code sample — keeps it as text. Tilde fences are not recognised.
* Inside thinking, the first ``</thinking>`` closes it, wherever it is; a
  tool call or another block also ends it (`leave_thinking`).
* Whitespace right after ``</thinking>`` (normally a blank line) is dropped
  so the answer's text block does not start with newlines.
* Blanks before ``<thinking>`` on its line are dropped (blanks that start a
  line are held back until the line shows whether a tag follows).

At end of stream, `flush()` releases anything held back: a partial tag is
just text (or thinking, inside an unterminated thinking section).
"""

from __future__ import annotations

import re
from enum import Enum

OPEN_TAG = "<thinking>"
CLOSE_TAG = "</thinking>"


class SegmentKind(Enum):
    TEXT = "text"
    THINKING = "thinking"
    THINKING_END = "thinking_end"  # a `</thinking>` was read: close the thinking block


Segment = tuple[SegmentKind, str]


class SplitterMode(Enum):
    TEXT = "text"  # reply text; a `<thinking>` at a line start outside code opens thinking
    THINKING = "thinking"  # inside `<thinking>`; only `</thinking>` matters
    AFTER_THINKING = "after_thinking"  # just closed; leading whitespace of the answer is dropped


class CodeSpan(Enum):
    """Where the text scanner stands relative to markdown code."""

    NONE = "none"
    INLINE = "inline"
    FENCE = "fence"


_TEXT = SegmentKind.TEXT
_THINKING = SegmentKind.THINKING
_END = (SegmentKind.THINKING_END, "")
# The characters that can change the scanner's state in TEXT mode.
_TEXT_SPECIAL = re.compile(r"[`\n<]")
_BLANKS = " \t"
_TEXT_MODE = SplitterMode.TEXT


class ThinkingTagSplitter:
    """Incremental `<thinking>` tag splitter; `feed(chunk)` → segments, `flush()` at the end."""

    __slots__ = ("_code", "_code_ticks", "_held", "_line_start", "enabled", "mode")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.mode = SplitterMode.TEXT
        self._held = ""  # a suffix that may still become a tag or a longer backtick run
        self._code = CodeSpan.NONE
        self._code_ticks = 0  # length of the backtick run that opened the current code span
        self._line_start = True  # only blanks so far on the current line (outside thinking)

    def take_plain(self, chunk: str) -> str | None:
        """Fast path: the text of a chunk that holds no tag character, or None (use `feed`).

        Plain text can only change the line state (and end an inline code span
        at a newline), so no scanning is needed.
        """
        if not self.enabled:
            return chunk
        if self.mode is not _TEXT_MODE or self._held or "<" in chunk or "`" in chunk:
            return None
        self._note_plain(chunk)
        if self._line_start and self._code is CodeSpan.NONE:
            return self._hold_trailing_blanks(chunk)
        return chunk

    def feed(self, chunk: str) -> list[Segment]:
        if not self.enabled:
            return [(_TEXT, chunk)] if chunk else []
        text = self.take_plain(chunk)
        if text is not None:
            return [(_TEXT, text)] if text else []
        text = self._held + chunk
        self._held = ""
        out: list[Segment] = []
        self._scan(text, out, final=False)
        return out

    def flush(self) -> list[Segment]:
        """End of stream: release whatever was held back."""
        held, self._held = self._held, ""
        if not held:
            return []
        if self.mode is SplitterMode.THINKING:
            return [(_THINKING, held)]
        if self.mode is SplitterMode.AFTER_THINKING:
            return []
        out: list[Segment] = []
        self._scan(held, out, final=True)
        return out

    def drain(self) -> list[Segment]:
        """Release held-back characters without ending the stream (another block is starting).

        A held partial tag cannot complete across a block boundary, so it is content.
        """
        held, self._held = self._held, ""
        if not held or self.mode is SplitterMode.AFTER_THINKING:
            return []
        return [(_THINKING if self.mode is SplitterMode.THINKING else _TEXT, held)]

    def leave_thinking(self) -> None:
        """Another kind of block started: an unterminated `<thinking>` is over."""
        if self.mode is SplitterMode.THINKING:
            self.mode = SplitterMode.AFTER_THINKING

    # ------------------------------------------------------------------ scanning

    def _scan(self, text: str, out: list[Segment], final: bool) -> None:
        while text:
            mode = self.mode
            if mode is SplitterMode.TEXT:
                text = self._scan_text(text, out, final)
            elif mode is SplitterMode.THINKING:
                text = self._scan_thinking(text, out, final)
            else:
                stripped = text.lstrip()
                if not stripped:
                    return
                self._enter_text()
                text = stripped

    def _scan_text(self, text: str, out: list[Segment], final: bool) -> str:
        """Scan TEXT mode; return the unscanned rest after a mode change, else ""."""
        position = 0
        end = len(text)
        search = _TEXT_SPECIAL.search
        while True:
            match = search(text, position)
            if match is None:
                tail = text[position:]
                self._note_plain(tail)
                if tail and not final and self._line_start and self._code is CodeSpan.NONE:
                    text = self._hold_trailing_blanks(text)
                _append(out, _TEXT, text)
                return ""
            index = match.start()
            if self._line_start and text[position:index].strip(_BLANKS):
                self._line_start = False
            char = text[index]
            if char == "\n":
                self._line_start = True
                if self._code is CodeSpan.INLINE:
                    self._code = CodeSpan.NONE
                position = index + 1
            elif char == "`":
                run_end = index + 1
                while run_end < end and text[run_end] == "`":
                    run_end += 1
                if run_end == end and not final:
                    # The run may continue in the next chunk; its length decides fences.
                    _append(out, _TEXT, text[:index])
                    self._held = text[index:]
                    return ""
                self._on_backtick_run(run_end - index)
                position = run_end
            else:  # "<"
                if self._line_start and self._code is CodeSpan.NONE:
                    if text.startswith(OPEN_TAG, index):
                        _append(out, _TEXT, text[:index].rstrip(_BLANKS))
                        self.mode = SplitterMode.THINKING
                        return text[index + len(OPEN_TAG) :]
                    if not final and OPEN_TAG.startswith(text[index:]):
                        # Hold the partial tag with the blanks before it (its indent).
                        kept = text[:index].rstrip(_BLANKS)
                        _append(out, _TEXT, kept)
                        self._held = text[len(kept) :]
                        return ""
                self._line_start = False
                position = index + 1

    def _scan_thinking(self, text: str, out: list[Segment], final: bool) -> str:
        index = text.find(CLOSE_TAG)
        if index >= 0:
            _append(out, _THINKING, text[:index])
            out.append(_END)
            self.mode = SplitterMode.AFTER_THINKING
            return text[index + len(CLOSE_TAG) :]
        keep = 0 if final else _partial_suffix_length(text, CLOSE_TAG)
        if keep:
            self._held = text[-keep:]
            text = text[:-keep]
        _append(out, _THINKING, text)
        return ""

    def _on_backtick_run(self, length: int) -> None:
        code = self._code
        if code is CodeSpan.NONE:
            if self._line_start and length >= 3:
                self._code = CodeSpan.FENCE
            else:
                self._code = CodeSpan.INLINE
            self._code_ticks = length
        elif code is CodeSpan.INLINE:
            if length == self._code_ticks:
                self._code = CodeSpan.NONE
        elif self._line_start and length >= self._code_ticks:
            self._code = CodeSpan.NONE
        self._line_start = False

    def _hold_trailing_blanks(self, text: str) -> str:
        """`text` without its trailing blanks, which are held: at a line start they may be
        the indent of a `<thinking>` tag still to come."""
        kept = text.rstrip(_BLANKS)
        self._held = text[len(kept) :]
        return kept

    def _note_plain(self, text: str) -> None:
        """Update line state for text holding no backtick or `<`."""
        newline = text.rfind("\n")
        if newline >= 0:
            if self._code is CodeSpan.INLINE:
                self._code = CodeSpan.NONE
            self._line_start = not text[newline + 1 :].strip(_BLANKS)
        elif self._line_start and text.strip(_BLANKS):
            self._line_start = False

    def _enter_text(self) -> None:
        self.mode = SplitterMode.TEXT
        self._code = CodeSpan.NONE
        self._line_start = True


def _append(out: list[Segment], kind: SegmentKind, text: str) -> None:
    if text:
        out.append((kind, text))


def _partial_suffix_length(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    start = text.rfind("<", max(0, len(text) - len(tag) + 1))
    if start >= 0 and tag.startswith(text[start:]):
        return len(text) - start
    return 0
