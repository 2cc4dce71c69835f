"""Tool input: buffered, judged, and sent so the SDK's partial-JSON parser never sees a bad prefix."""

from __future__ import annotations

import json

import jiter
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.translation.tool_input import ToolInputBuffer, ToolInputVerdict
from tests.support.pipeline import aggregate, run_pipeline, tool_event


def judged(*fragments) -> tuple[ToolInputVerdict, str]:
    buffer = ToolInputBuffer("id", "name")
    for fragment in fragments:
        buffer.add(fragment)
    return buffer.judge()


def test_verdicts():
    assert judged() == (ToolInputVerdict.EMPTY, "{}")
    assert judged("", "  ") == (ToolInputVerdict.EMPTY, "{}")
    assert judged('{"a"', ": 1}") == (ToolInputVerdict.COMPLETE, '{"a": 1}')
    assert judged('{"a": 1')[0] is ToolInputVerdict.TRUNCATED
    assert judged('{"a": 1}}')[0] is ToolInputVerdict.TRUNCATED
    assert judged("[1]")[0] is ToolInputVerdict.NOT_AN_OBJECT
    assert judged('"text"')[0] is ToolInputVerdict.NOT_AN_OBJECT
    assert judged({"a": [1]}) == (ToolInputVerdict.COMPLETE, '{"a":[1]}')


def test_received_chars_counts_fragments():
    buffer = ToolInputBuffer("id", "n")
    buffer.add('{"a":')
    buffer.add(" 1}")
    assert buffer.received_chars == 8


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def sdk_partial_parse_every_prefix(deltas: list[str]) -> object:
    """What the SDK's accumulator does after every input_json_delta (lib/streaming/_messages.py)."""
    buffer = b""
    value: object = {}
    for delta in deltas:
        buffer += delta.encode("utf-8")
        if buffer:
            value = jiter.from_json(buffer, partial_mode=True)  # raises ValueError on a bad prefix
    return value


@settings(max_examples=200, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6),
    cuts=st.lists(st.integers(0, 400), max_size=30),
    pretty=st.booleans(),
    batched=st.booleans(),
)
def test_any_fragmentation_yields_valid_prefixes_and_the_original_input(value, cuts, pretty, batched):
    text = json.dumps(value, indent=2 if pretty else None, ensure_ascii=False)
    points = sorted({c for c in cuts if 0 < c < len(text)})
    fragments = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=False)]
    upstream = [tool_event("t", "n"), *(tool_event("t", "n", f) for f in fragments), tool_event("t", "n", stop=True)]
    events = run_pipeline(upstream, per_frame=not batched)
    deltas = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert sdk_partial_parse_every_prefix(deltas) == orjson.loads(orjson.dumps(value))
    assert aggregate(events)["content"][0]["input"] == orjson.loads(orjson.dumps(value))


@settings(max_examples=100, deadline=None)
@given(value=st.dictionaries(st.text(min_size=1, max_size=10), JSON_VALUES, min_size=1, max_size=6), data=st.data())
def test_a_cut_off_input_is_never_emitted(value, data):
    text = json.dumps(value)
    cut = data.draw(st.integers(1, len(text) - 1))
    upstream = [tool_event("t", "n", text[:cut])]
    events = run_pipeline(upstream)
    assert not any(e["type"] == "content_block_start" for e in events)
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("stop", [True, None])
def test_a_cut_off_input_is_withheld_with_or_without_stop(stop):
    events = run_pipeline([tool_event("t", "Write", '{"content": "abc', stop=stop)])
    assert aggregate(events)["content"] == []
    assert aggregate(events)["stop_reason"] == "max_tokens"
