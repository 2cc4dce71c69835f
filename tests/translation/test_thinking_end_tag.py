"""Where a `</thinking>` ends thinking and where it is only quoted (issue 21; KRS's real-end-tag rule)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.translation.thinking_split import ThinkingTagSplitter
from tests.support.thinking_segments import END, TEXT, THINKING, split


@pytest.mark.parametrize(
    "quoted",
    [
        "Close it with `</thinking>` later.",
        'The tag "</thinking>" ends it.',
        "The tag '</thinking>' ends it.",
        "I will write </thinking> when I am done.",
        "```xml\n</thinking>\n```",
        "code: ``a </thinking> b``",
    ],
)
def test_a_quoted_end_tag_stays_inside_the_thinking(quoted: str) -> None:
    reply = f"<thinking>{quoted}\nStill thinking.</thinking>\n\nThe answer."
    assert split([reply]) == [(THINKING, f"{quoted}\nStill thinking."), (END, ""), (TEXT, "The answer.")]


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("<thinking>t</thinking>\n\nAnswer", "Answer"),
        ("<thinking>t</thinking>  \nAnswer", "Answer"),
        ("<thinking>t</thinking>Answer", "Answer"),
        ("<thinking>t</thinking>", None),
        ("<thinking>t</thinking>   ", None),
    ],
)
def test_a_real_end_tag_ends_it(reply: str, answer: str | None) -> None:
    expected = [(THINKING, "t"), (END, "")] + ([(TEXT, answer)] if answer else [])
    assert split([reply]) == expected


def test_the_decision_waits_for_the_characters_after_the_tag() -> None:
    splitter = ThinkingTagSplitter()
    assert splitter.feed("<thinking>plan</thinking>") == [(THINKING, "plan")]
    assert splitter.feed("  ") == []  # blanks: a line break or more words may follow
    assert splitter.feed("\nAnswer") == [(END, ""), (TEXT, "Answer")]


def test_a_held_end_tag_before_another_block_is_an_end() -> None:
    splitter = ThinkingTagSplitter()
    splitter.feed("<thinking>plan</thinking>")
    assert splitter.drain() == [(END, "")]


REPLIES = st.sampled_from(
    [
        "<thinking>use `</thinking>` to close</thinking>\n\nok",
        '<thinking>"</thinking>" is the tag</thinking>Answer',
        "<thinking>a </thinking> b\n```\n</thinking>\n```\n</thinking>\nend",
        "<thinking>x</thinking>  \n\ny",
    ]
)


@settings(max_examples=200, deadline=None)
@given(reply=REPLIES, cuts=st.lists(st.integers(min_value=0, max_value=90), max_size=8))
def test_chunking_never_changes_where_thinking_ends(reply: str, cuts: list[int]) -> None:
    points = sorted({c for c in cuts if 0 < c < len(reply)})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=False)]
    assert split(chunks) == split([reply])
    assert split([reply])[-2:][0] == (END, "")
