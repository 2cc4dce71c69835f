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
* Inside thinking, a ``</thinking>`` closes it where it stands as a real end
  tag, not where the model quotes it: not inside markdown code of the thinking
  text (inline span or fence, tracked as above), not right after or right
  before a quote character (`` ` `` ``"`` ``'``), and not followed on its line by
  a blank and more words (``</thinking> tags mark…`` is prose). It is real when
  a line break follows (after optional blanks), when the reply or the block
  ends there, or when the answer follows it directly (``</thinking>Answer``).
  This follows KRS `src/anthropic/stream.rs::find_real_thinking_end_tag`
  (quote characters around the tag make it a mention; a real end tag is
  followed by a line break, or only blanks at the end of a block) but keeps a
  tag glued to the answer as an end, as Kiro replies have it; text held back
  to decide is at most the tag and the blanks after it. A tool call or
  another block also ends thinking (`leave_thinking`).
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
_QUOTES = "`\"'"
_TEXT_MODE = SplitterMode.TEXT


class ThinkingTagSplitter:
    """Incremental `<thinking>` tag splitter; `feed(chunk)` → segments, `flush()` at the end."""

    __slots__ = ("_code", "_code_ticks", "_held", "_last_thought", "_line_start", "enabled", "mode")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.mode = SplitterMode.TEXT
        self._held = ""  # a suffix that may still become a tag or a longer backtick run
        self._code = CodeSpan.NONE
        self._code_ticks = 0  # length of the backtick run that opened the current code span
        self._line_start = True  # only blanks so far on the current line
        self._last_thought = ""  # the last character of thinking text given out (is a tag quoted?)

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
        if not held or self.mode is SplitterMode.AFTER_THINKING:
            return []
        out: list[Segment] = []
        self._scan(held, out, final=True)  # inside thinking, a held end tag is real at the end
        return out

    def drain(self) -> list[Segment]:
        """Release held-back characters without ending the stream (another block is starting).

        A held partial tag cannot complete across a block boundary, so it is content.
        """
        held, self._held = self._held, ""
        if not held or self.mode is SplitterMode.AFTER_THINKING:
            return []
        if self.mode is SplitterMode.THINKING:
            out: list[Segment] = []
            self._scan_lines(held, out, final=True)  # a held end tag before a block boundary is real
            return out
        return [(_TEXT, held)]

    def leave_thinking(self) -> None:
        """Another kind of block started: an unterminated `<thinking>` is over."""
        if self.mode is SplitterMode.THINKING:
            self.mode = SplitterMode.AFTER_THINKING

    # ------------------------------------------------------------------ scanning

    def _scan(self, text: str, out: list[Segment], final: bool) -> None:
        while text:
            mode = self.mode
            if mode is SplitterMode.TEXT or mode is SplitterMode.THINKING:
                text = self._scan_lines(text, out, final)
            else:
                stripped = text.lstrip()
                if not stripped:
                    return
                self._enter_text()
                text = stripped

    def _scan_lines(self, text: str, out: list[Segment], final: bool) -> str:
        """Scan TEXT or THINKING mode: follow the lines and the markdown code, and hand each `<` to the
        mode's tag rule. Returns the unscanned rest after a mode change, else "" (given out or held)."""
        thinking = self.mode is SplitterMode.THINKING
        give = self._think if thinking else _give_text
        position = 0
        end = len(text)
        search = _TEXT_SPECIAL.search
        while True:
            match = search(text, position)
            if match is None:
                tail = text[position:]
                self._note_plain(tail)
                if not thinking and tail and not final and self._line_start and self._code is CodeSpan.NONE:
                    text = self._hold_trailing_blanks(text)
                give(out, text)
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
                    give(out, text[:index])
                    self._held = text[index:]
                    return ""
                self._on_backtick_run(run_end - index)
                position = run_end
            else:  # "<"
                rule = self._at_close_tag if thinking else self._at_open_tag
                rest_or_position = rule(text, index, out, final)
                if isinstance(rest_or_position, str):
                    return rest_or_position
                self._line_start = False
                position = rest_or_position

    def _at_open_tag(self, text: str, index: int, out: list[Segment], final: bool) -> str | int:
        """TEXT mode's rule for the `<` at `index`: the rest to return (a tag opened thinking, or a partial
        one is held), or the position to scan on from."""
        if self._line_start and self._code is CodeSpan.NONE:
            if text.startswith(OPEN_TAG, index):
                _append(out, _TEXT, text[:index].rstrip(_BLANKS))
                self.mode = SplitterMode.THINKING
                self._line_start = True  # the thinking starts a line of its own (a fence may open it)
                self._last_thought = ""
                return text[index + len(OPEN_TAG) :]
            if not final and OPEN_TAG.startswith(text[index:]):
                # Hold the partial tag with the blanks before it (its indent).
                kept = text[:index].rstrip(_BLANKS)
                _append(out, _TEXT, kept)
                self._held = text[len(kept) :]
                return ""
        return index + 1

    def _at_close_tag(self, text: str, index: int, out: list[Segment], final: bool) -> str | int:
        """THINKING mode's rule for the `<` at `index`: the rest to return (the real end tag closed
        thinking, or what decides is still to come and is held), or the position to scan on from."""
        if self._code is not CodeSpan.NONE:
            return index + 1
        if text.startswith(CLOSE_TAG, index):
            real = self._real_end_tag(text, index, final)
            if real is None:  # the characters that decide have not arrived yet
                self._think(out, text[:index])
                self._held = text[index:]
                return ""
            if real:
                self._think(out, text[:index])
                out.append(_END)
                self.mode = SplitterMode.AFTER_THINKING
                return text[index + len(CLOSE_TAG) :]
            return index + len(CLOSE_TAG)  # a mention of the tag: thinking goes on
        if not final and CLOSE_TAG.startswith(text[index:]):
            self._think(out, text[:index])
            self._held = text[index:]
            return ""
        return index + 1

    def _real_end_tag(self, text: str, index: int, final: bool) -> bool | None:
        """Whether the `</thinking>` at `index` ends thinking (see the module docstring); None: undecided yet."""
        before = text[index - 1] if index else self._last_thought
        if before and before in _QUOTES:
            return False
        after = text[index + len(CLOSE_TAG) :]
        rest = after.lstrip(_BLANKS)
        if not rest:
            return True if final else None
        if after[0] in _QUOTES:
            return False
        if rest[0] in "\r\n":
            return True
        return rest is after  # glued to the answer: an end; a blank and more words: prose

    def _think(self, out: list[Segment], text: str) -> None:
        if text:
            out.append((_THINKING, text))
            self._last_thought = text[-1]

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


def _give_text(out: list[Segment], text: str) -> None:
    _append(out, _TEXT, text)


def _partial_suffix_length(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    start = text.rfind("<", max(0, len(text) - len(tag) + 1))
    if start >= 0 and tag.startswith(text[start:]):
        return len(text) - start
    return 0
