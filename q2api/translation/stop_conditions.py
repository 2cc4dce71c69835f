"""Local emulation of `stop_sequences` and `max_tokens` (Amazon Q has neither,
docs/protocol.md#request-body).

Both work on streamed text without seeing the future:

* `StopSequenceMatcher` holds back only the longest suffix that could still
  grow into a stop sequence, so a match spanning upstream frames is found and
  nothing past it ever reaches the client.
* `OutputTokenCounter` keeps an output-token estimate cheap enough for the
  per-frame hot path and cuts text exactly where the budget runs out.
"""

from __future__ import annotations

from collections.abc import Iterable

from q2api.anthropic.token_count import estimate_text_tokens


class StopSequenceMatcher:
    """Finds the first stop sequence in streamed text.

    "First" is the match that *ends* earliest — the point where the real model
    would have stopped — and among those the longest.
    """

    __slots__ = ("_held", "sequences")

    def __init__(self, sequences: Iterable[str]) -> None:
        self.sequences = tuple(dict.fromkeys(s for s in sequences if s))
        self._held = ""

    def feed(self, text: str) -> tuple[str, str | None]:
        """Return (text safe to emit, matched sequence or None). After a match, stop feeding."""
        if self._held:
            text = self._held + text
            self._held = ""
        best: str | None = None
        best_start = best_end = 0
        for sequence in self.sequences:
            start = text.find(sequence)
            if start >= 0:
                end = start + len(sequence)
                if best is None or end < best_end or (end == best_end and start < best_start):
                    best, best_start, best_end = sequence, start, end
        if best is not None:
            return text[:best_start], best
        keep = self._partial_match_length(text)
        if keep:
            self._held = text[-keep:]
            return text[:-keep], None
        return text, None

    def drain(self) -> str:
        """Release the held-back suffix (the text it belongs to has ended)."""
        held, self._held = self._held, ""
        return held

    def _partial_match_length(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a sequence."""
        keep = 0
        end = len(text)
        for sequence in self.sequences:
            first = sequence[0]
            # Candidates start with the sequence's first character; scanning left to right
            # finds the longest suffix first.
            start = text.find(first, max(0, end - len(sequence) + 1))
            while start >= 0 and end - start > keep:
                if sequence.startswith(text[start:]):
                    keep = end - start
                    break
                start = text.find(first, start + 1)
        return keep


# Upper bound of estimate_text_tokens per character. Any byte-level tokenizer spends at
# most one token per UTF-8 byte, and a character has at most 4 bytes. The estimator is too
# costly to run per frame (tens of ns per character), so text is only priced when this
# bound says the limit might be near, and once more for the final count.
_MAX_TOKENS_PER_CHAR = 4


class OutputTokenCounter:
    """Output-token estimate of the reply so far, with an optional hard limit (`max_tokens`).

    Text is kept unpriced until needed: far from the limit the cheap bound
    `priced + 4 × unpriced characters` proves it fits. When the bound fails, the
    whole reply so far is priced (one estimator call; it costs about the same for
    any length), so counts and cut points never depend on how the text was
    chunked. The unpriced stretch shrinks towards the limit geometrically, so only
    a handful of pricings happen before the exact cut.
    """

    __slots__ = ("_chars", "_parts", "_priced", "_priced_chars", "byte_limit", "bytes", "limit")

    def __init__(self, limit: int | None = None, byte_limit: int | None = None) -> None:
        self.limit = limit
        # The reply's size in UTF-8 bytes is bounded too: repetitive text costs few tokens, and a
        # reply of 250 MB within its token budget was held whole (Q2API_MAX_REPLY_BYTES).
        self.byte_limit = byte_limit
        self.bytes = 0  # UTF-8 bytes of text, thinking and tool input counted so far
        self._parts: list[str] = []  # the counted text, in order
        self._chars = 0
        self._priced = 0  # tokens of the first `_priced_chars` characters
        self._priced_chars = 0

    def over_bytes(self, more: int) -> bool:
        """True when `more` bytes beyond those counted would pass the byte limit."""
        return self.byte_limit is not None and self.bytes + more > self.byte_limit

    @property
    def total(self) -> int:
        if self._priced_chars != self._chars:
            self._price()
        return self._priced

    def add(self, text: str) -> None:
        """Count `text` whatever the limit (tool input: it cannot be cut)."""
        self._parts.append(text)
        self._chars += len(text)
        self.bytes += len(text.encode("utf-8", "surrogatepass"))

    def admit(self, text: str) -> str:
        """Count and return the longest prefix of `text` that fits the limit.

        A result shorter than `text` means the budget (of tokens or of bytes) is spent.
        """
        size = len(text.encode("utf-8", "surrogatepass"))
        if self.over_bytes(size):
            assert self.byte_limit is not None
            # Cut at the byte bound (never inside a character), then admitted as any other text.
            fitting = text.encode("utf-8", "surrogatepass")[: self.byte_limit - self.bytes]
            cut = fitting.decode("utf-8", "ignore")
            admitted = self._admit_tokens(cut) if cut else ""
            self.bytes = self.byte_limit  # spent: nothing more is admitted
            return admitted
        self.bytes += size
        return self._admit_tokens(text)

    def _admit_tokens(self, text: str) -> str:
        limit = self.limit
        chars = self._chars + len(text)
        if limit is None or self._priced + _MAX_TOKENS_PER_CHAR * (chars - self._priced_chars) <= limit:
            self._parts.append(text)
            self._chars = chars
            return text
        self._parts.append(text)
        self._chars = chars
        self._price()
        if self._priced <= limit:
            return text
        # Over the limit: give back `text` and find its longest prefix that fits.
        before = self._parts[0][: self._chars - len(text)]
        low, high = 0, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if estimate_text_tokens(before + text[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        self._parts = [before + text[:low]]
        self._chars = len(self._parts[0])
        self._price()
        return text[:low]

    def _price(self) -> None:
        whole = "".join(self._parts)
        self._parts = [whole]
        self._priced = estimate_text_tokens(whole)
        self._priced_chars = len(whole)
