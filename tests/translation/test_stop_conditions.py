"""Local stop_sequences and max_tokens: exact cuts, chunking-independent, never over budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic.token_count import estimate_text_tokens
from q2api.translation.stop_conditions import OutputTokenCounter, StopSequenceMatcher
from tests.support.pipeline import aggregate, make_translator, run_pipeline, text_event


def match_in_chunks(sequences: list[str], chunks: list[str]) -> tuple[str, str | None]:
    matcher = StopSequenceMatcher(sequences)
    emitted = []
    for chunk in chunks:
        text, matched = matcher.feed(chunk)
        emitted.append(text)
        if matched is not None:
            return "".join(emitted), matched
    emitted.append(matcher.drain())
    return "".join(emitted), None


def test_the_earliest_ending_match_wins():
    assert match_in_chunks(["abcd", "c"], ["xxabcd"]) == ("xxab", "c")
    assert match_in_chunks(["bc", "abc"], ["zabc"]) == ("z", "abc")  # same end: the longer one


def test_only_a_possible_prefix_is_held_back():
    matcher = StopSequenceMatcher(["STOP"])
    assert matcher.feed("hello ST") == ("hello ", None)
    assert matcher.feed("ART") == ("START", None)
    assert matcher.drain() == ""


def test_empty_and_duplicate_sequences_are_ignored():
    assert StopSequenceMatcher(["", "a", "a"]).sequences == ("a",)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ab\nHumn: ", max_size=40),
    sequences=st.lists(st.text(alphabet="ab\nH:", min_size=1, max_size=4), min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 40), max_size=6),
)
def test_matching_is_chunking_independent_and_cuts_at_the_first_end(text, sequences, cuts):
    points = sorted({c for c in cuts if 0 < c < len(text)})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=False)]
    emitted, matched = match_in_chunks(sequences, chunks)
    assert (emitted, matched) == match_in_chunks(sequences, [text])
    ends = [text.find(s) + len(s) for s in sequences if s in text]
    if ends:
        assert matched is not None and emitted + matched == text[: min(ends)]
    else:
        assert matched is None and emitted == text


def test_counter_total_is_the_estimate_of_the_whole_reply():
    for limit in (None, 10_000):
        counter = OutputTokenCounter(limit)
        pieces = ["Hello, ", "world! ", "你好 ", "🙂 "] * 300
        for piece in pieces:
            assert counter.admit(piece) == piece
        assert counter.total == estimate_text_tokens("".join(pieces))


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(1, 60),
    chunks=st.lists(
        st.lists(st.sampled_from(["a", "b ", "é", "中", "🙂", "\n", "word "]), max_size=30).map("".join),
        max_size=12,
    ),
)
def test_counter_never_admits_past_the_limit(limit, chunks):
    counter = OutputTokenCounter(limit)
    admitted = []
    for chunk in chunks:
        fitting = counter.admit(chunk)
        assert chunk.startswith(fitting)
        admitted.append(fitting)
        if len(fitting) < len(chunk):
            break
    text = "".join(admitted)
    assert counter.total == estimate_text_tokens(text) <= limit


def test_stop_sequence_is_not_applied_to_thinking():
    events = run_pipeline([text_event("<thinking>STOP here</thinking>Then STOP.")], stop_sequences=["STOP"])
    message = aggregate(events)
    assert message["content"][0]["thinking"] == "STOP here"
    assert message["content"][1]["text"] == "Then "
    assert message["stop_reason"] == "stop_sequence"


def test_stop_sequence_at_the_very_start_leaves_no_text_block():
    message = aggregate(run_pipeline([text_event("STOP now")], stop_sequences=["STOP"]))
    assert message["content"] == [] and message["stop_reason"] == "stop_sequence"


def test_stop_sequence_held_across_a_tool_call_is_released_as_text():
    from tests.support.pipeline import tool_event

    events = run_pipeline([text_event("done ST"), tool_event("t", "n", "{}", stop=True)], stop_sequences=["STOP"])
    message = aggregate(events)
    assert message["content"][0] == {"type": "text", "text": "done ST"}
    assert message["stop_reason"] == "tool_use"


def test_max_tokens_cuts_thinking_too():
    translator = make_translator(max_tokens=3)
    message = aggregate(run_pipeline([text_event("<thinking>" + "think hard " * 20)], translator=translator))
    assert message["stop_reason"] == "max_tokens"
    assert [b["type"] for b in message["content"]] == ["thinking"]
    assert message["content"][0]["signature"]
    assert estimate_text_tokens(message["content"][0]["thinking"]) <= 3


def test_reply_that_fits_exactly_ends_normally():
    text = "four tokens here ok"
    budget = estimate_text_tokens(text)
    message = aggregate(run_pipeline([text_event(text)], max_tokens=budget))
    assert message["stop_reason"] == "end_turn" and message["content"][0]["text"] == text


@settings(max_examples=100, deadline=None)
@given(
    limit=st.integers(1, 40),
    pieces=st.lists(st.sampled_from(["Hello ", "world", " 你好", "🙂", "\n\n", "<", "x`y"]), min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_max_tokens_result_does_not_depend_on_framing(limit, pieces, cuts):
    upstream = b"".join(text_event(p) for p in pieces)
    whole = aggregate(run_pipeline(upstream, max_tokens=limit, thinking_tags=False))
    split = aggregate(run_pipeline(upstream, cuts=cuts, max_tokens=limit, thinking_tags=False, per_frame=True))
    assert whole == split
    assert whole["usage"]["output_tokens"] <= limit


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="abc", max_size=12),
    sequences=st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=3),
)
def test_the_held_back_suffix_is_the_longest_possible_prefix(text, sequences):
    matcher = StopSequenceMatcher(sequences)
    emitted, matched = matcher.feed(text)
    if matched is not None:
        return
    brute_force = max(
        (k for s in sequences for k in range(1, min(len(s) - 1, len(text)) + 1) if text.endswith(s[:k])),
        default=0,
    )
    assert len(text) - len(emitted) == brute_force
