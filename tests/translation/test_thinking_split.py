"""The `<thinking>` tag splitter: where tags count, and chunking never changes the result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.translation.thinking_split import ThinkingTagSplitter
from tests.support.thinking_segments import END, TEXT, THINKING, split


def test_leading_thinking_then_answer():
    assert split(["<thinking>plan</thinking>\n\nAnswer"]) == [(THINKING, "plan"), (END, ""), (TEXT, "Answer")]


def test_tags_split_at_every_position():
    reply = "<thinking>a b c</thinking>\nDone"
    for cut in range(1, len(reply)):
        assert split([reply[:cut], reply[cut:]]) == [(THINKING, "a b c"), (END, ""), (TEXT, "Done")], cut


def test_thinking_at_the_start_of_a_later_line_counts():
    assert split(["Intro\n<thinking>x</thinking>\nMore"]) == [
        (TEXT, "Intro\n"),
        (THINKING, "x"),
        (END, ""),
        (TEXT, "More"),
    ]


def test_indented_tag_counts_and_its_indent_is_dropped():
    assert split(["Intro\n  <thinking>x</thinking>y"]) == [(TEXT, "Intro\n"), (THINKING, "x"), (END, ""), (TEXT, "y")]


def test_tag_in_the_middle_of_a_line_is_text():
    reply = "Use a <thinking> tag like this: <thinking>x</thinking>"
    assert split([reply]) == [(TEXT, reply)]


def test_tag_inside_inline_code_is_text():
    reply = "`<thinking>` is a tag\n``<thinking>`` too"
    assert split([reply]) == [(TEXT, reply)]


def test_tag_inside_a_fence_is_text_and_after_the_fence_counts_again():
    reply = "```\n<thinking>quoted</thinking>\n```\n<thinking>real</thinking>ok"
    assert split([reply]) == [
        (TEXT, "```\n<thinking>quoted</thinking>\n```\n"),
        (THINKING, "real"),
        (END, ""),
        (TEXT, "ok"),
    ]


def test_fence_opened_by_backticks_split_across_chunks():
    assert split(["``", "`py\n<thinking>no</thinking>\n`", "``\n"]) == [(TEXT, "```py\n<thinking>no</thinking>\n```\n")]


def test_a_shorter_backtick_run_does_not_close_a_longer_fence():
    reply = "````\n```\n<thinking>still code</thinking>\n````\n"
    assert split([reply]) == [(TEXT, reply)]


def test_inline_code_ends_at_the_line_end():
    # An unmatched backtick must not hide a real tag on a later line.
    assert split(["don't ` do this\n<thinking>t</thinking>x"]) == [
        (TEXT, "don't ` do this\n"),
        (THINKING, "t"),
        (END, ""),
        (TEXT, "x"),
    ]


def test_unterminated_thinking_is_flushed_as_thinking():
    assert split(["<thinking>never closed </thin"]) == [(THINKING, "never closed </thin")]


def test_partial_open_tag_at_the_end_is_flushed_as_text():
    assert split(["Hello\n<think"]) == [(TEXT, "Hello\n<think")]


def test_disabled_splitter_passes_everything_as_text():
    assert split(["<thinking>x</thinking>"], enabled=False) == [(TEXT, "<thinking>x</thinking>")]


def test_drain_releases_held_characters_without_ending():
    splitter = ThinkingTagSplitter()
    assert splitter.feed("a\n<thi") == [(TEXT, "a\n")]
    assert splitter.drain() == [(TEXT, "<thi")]
    assert splitter.flush() == []


REPLIES = st.sampled_from(
    [
        "<thinking>plan it</thinking>\n\nThe answer.",
        "Text `code <thinking>` and\n```\n<thinking>\n```\n<thinking>yes</thinking>end",
        "no tags at all, just < and > and ` marks",
        "<thinking>a</thinking><thinking>b</thinking>",
        "x\n\t<thinking>indented</thinking>\n",
        "<thinking>unterminated </thinkin",
        "```` fence\n``` not closing\n````\n<thinking>t</thinking>",
    ]
)


@settings(max_examples=200, deadline=None)
@given(reply=REPLIES, cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8))
def test_any_chunking_gives_the_same_segments(reply: str, cuts: list[int]):
    points = sorted({c for c in cuts if 0 < c < len(reply)})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=False)]
    assert split(chunks) == split([reply])
    # Nothing is lost: every character is in a segment or is a tag / dropped whitespace.
    text = "".join(t for _, t in split(chunks))
    assert len(text) <= len(reply)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab<>/`\n thinkg", max_size=60), cuts=st.lists(st.integers(0, 60), max_size=6))
def test_chunking_invariance_on_random_text(text: str, cuts: list[int]):
    points = sorted({c for c in cuts if 0 < c < len(text)})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=False)]
    assert split(chunks) == split([text])
