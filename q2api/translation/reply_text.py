"""The text and thinking blocks of a reply: Amazon Q's reply text and native reasoning → content blocks.

Reply text (`assistantResponseEvent.content`) goes through three stages, each independent of how the
text is chunked (which is what lets the translator join a read's texts into one delta):

1. the `<thinking>` tag splitter (q2api.translation.thinking_split): inline reasoning becomes
   thinking, the rest text;
2. the stop-sequence matcher (q2api.translation.stop_conditions): text past a stop sequence never
   leaves;
3. the `max_tokens` budget (the same module's `OutputTokenCounter`, which tool input counts against
   too): text is cut exactly where it runs out.

Native reasoning (`reasoningContentEvent`, docs/protocol.md#native-thinking) skips the splitter and the
stop sequences; it still spends the budget. A block that does not come from the text stream (native
thinking, a redacted block, a tool call) first settles the text: what the splitter and the matcher
hold back is released, and an unterminated inline `<thinking>` ends.

Every step that writes returns why the reply must end now (`stop_sequence`, `max_tokens`), or None:
ending the message is the translator's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from q2api.anthropic.events import StreamEvent
from q2api.translation.content_blocks import ContentBlocks, OpenBlock
from q2api.translation.stop_conditions import OutputTokenCounter, StopSequenceMatcher
from q2api.translation.thinking_split import Segment, SegmentKind, ThinkingTagSplitter

TextEnd = Literal["stop_sequence", "max_tokens"]

_TEXT = SegmentKind.TEXT
_THINKING = SegmentKind.THINKING
_TEXT_OPEN = OpenBlock.TEXT


class ReplyText:
    __slots__ = ("_blocks", "_counter", "_splitter", "_stop_matcher", "_thinking_tags", "stop_sequence")

    def __init__(
        self, blocks: ContentBlocks, counter: OutputTokenCounter, stop_sequences: Iterable[str], thinking_tags: bool
    ) -> None:
        self._blocks = blocks
        self._counter = counter
        self._thinking_tags = thinking_tags
        self._splitter = ThinkingTagSplitter(enabled=thinking_tags)
        matcher = StopSequenceMatcher(stop_sequences)
        self._stop_matcher = matcher if matcher.sequences else None
        self.stop_sequence: str | None = None  # the one matched, once the reply ended on it

    def text(self, content: str, out: list[StreamEvent]) -> TextEnd | None:
        """Reply text (non-empty)."""
        if self._blocks.open is _TEXT_OPEN:
            # Hot path: plain text continuing the open text block.
            text = self._splitter.take_plain(content)
            if text is not None:
                return self._text(text, out) if text else None
        return self._segments(self._splitter.feed(content), out)

    def native_thinking(self, text: str, out: list[StreamEvent]) -> TextEnd | None:
        """A native reasoning fragment (non-empty): into the open thinking block, else a new one."""
        if self._blocks.open is not OpenBlock.THINKING:
            end = self.settle(out)
            if end is not None:
                return end
        return self._thinking(text, out)

    def redacted_thinking(self, data: str, out: list[StreamEvent]) -> TextEnd | None:
        end = self.settle(out)
        if end is None:
            self._blocks.redacted_thinking(data, out)
        return end

    def settle(self, out: list[StreamEvent]) -> TextEnd | None:
        """Before a block that does not come from the text stream: release held-back text.

        A tool call or redacted block also ends an unterminated inline `<thinking>`.
        """
        end = self._segments(self._splitter.drain(), out)
        self._splitter.leave_thinking()
        return end if end is not None else self._release_held(out)

    def flush(self, out: list[StreamEvent]) -> TextEnd | None:
        """The upstream call ended: everything held back is text (or thinking) now."""
        end = self._segments(self._splitter.flush(), out)
        return end if end is not None else self._release_held(out)

    def restart(self) -> None:
        """A further upstream call continues the reply: its text starts on a fresh line, outside thinking."""
        self._splitter = ThinkingTagSplitter(enabled=self._thinking_tags)

    def _segments(self, segments: list[Segment], out: list[StreamEvent]) -> TextEnd | None:
        for kind, text in segments:
            if kind is _TEXT:
                end = self._text(text, out)
            elif kind is _THINKING:
                end = self._thinking(text, out)
            else:  # THINKING_END
                end = None
                if self._blocks.open is OpenBlock.THINKING:
                    self._blocks.close(out)
            if end is not None:
                return end
        return None

    def _text(self, text: str, out: list[StreamEvent]) -> TextEnd | None:
        matched = None
        if self._stop_matcher is not None:
            text, matched = self._stop_matcher.feed(text)
        if text:
            admitted = self._counter.admit(text)
            if admitted:
                self._blocks.text(admitted, out)
            if len(admitted) < len(text):
                return "max_tokens"
        if matched is not None:
            self.stop_sequence = matched
            return "stop_sequence"
        return None

    def _admit_text(self, text: str, out: list[StreamEvent]) -> TextEnd | None:
        admitted = self._counter.admit(text)
        if admitted:
            self._blocks.text(admitted, out)
        return "max_tokens" if len(admitted) < len(text) else None

    def _thinking(self, text: str, out: list[StreamEvent]) -> TextEnd | None:
        admitted = self._counter.admit(text)
        if admitted:
            self._blocks.thinking(admitted, out)
        return "max_tokens" if len(admitted) < len(text) else None

    def _release_held(self, out: list[StreamEvent]) -> TextEnd | None:
        """The stop-sequence matcher's held-back suffix: no sequence can complete any more."""
        if self._stop_matcher is not None:
            held = self._stop_matcher.drain()
            if held:
                return self._admit_text(held, out)
        return None
