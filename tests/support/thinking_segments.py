"""The `<thinking>` splitter's output in a form that does not depend on how the reply was chunked."""

from __future__ import annotations

from q2api.translation.thinking_split import SegmentKind, ThinkingTagSplitter

TEXT, THINKING, END = SegmentKind.TEXT, SegmentKind.THINKING, SegmentKind.THINKING_END


def split(chunks: list[str], enabled: bool = True) -> list[tuple[SegmentKind, str]]:
    """Segments of `chunks` fed in order, with same-kind neighbours joined (every END kept on its own)."""
    splitter = ThinkingTagSplitter(enabled=enabled)
    segments = []
    for chunk in chunks:
        segments += splitter.feed(chunk)
    segments += splitter.flush()
    joined: list[tuple[SegmentKind, str]] = []
    for kind, text in segments:
        if joined and joined[-1][0] is kind and kind is not END:
            joined[-1] = (kind, joined[-1][1] + text)
        else:
            joined.append((kind, text))
    return joined
