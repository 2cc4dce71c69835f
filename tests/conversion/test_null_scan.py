"""The null scan: the same answer as a plain recursive walk, on any JSON-like value."""

from __future__ import annotations

import enum
from collections import OrderedDict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from q2api.conversion.null_scan import holds_null


class Color(enum.StrEnum):
    RED = "red"


class Opaque:
    """Not JSON at all: the scan must not follow its references (its class, its module)."""

    def __init__(self) -> None:
        self.missing = None


def reference(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return None in value or any(reference(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(reference(item) for item in value)
    return False


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["null", ":null,", Color.RED]),
    st.builds(Opaque),
)
keys = st.one_of(st.text(max_size=4), st.integers(0, 3), st.sampled_from([Color.RED]))
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=4),
        st.tuples(children, children),
        st.builds(OrderedDict, st.dictionaries(st.text(max_size=4), children, max_size=3)),
    ),
    max_leaves=30,
)


@given(values)
def test_same_answer_as_the_plain_walk(value: Any) -> None:
    assert holds_null(value) == reference(value)


@given(st.lists(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3), max_size=5))
def test_a_clean_body_with_one_null_added_anywhere(documents: list[dict[str, str]]) -> None:
    body: dict[str, Any] = {"a": {"b": [documents, {"c": "null"}]}}
    assert not holds_null(body)
    body["a"]["b"][1]["d"] = [[{"e": None}]]
    assert holds_null(body)


def test_a_none_key_counts() -> None:
    assert holds_null({None: 1})
    assert holds_null([{"a": {None: "x"}}])


def test_deeper_than_the_level_limit() -> None:
    deep: Any = "x"
    for _ in range(600):
        deep = [deep]
    assert not holds_null(deep)
    deep[0][0] = None
    assert holds_null(deep)


def test_a_structure_that_contains_itself_ends_in_an_error_not_a_hang() -> None:
    loop: list[Any] = []
    loop.append(loop)
    try:
        holds_null(loop)
    except RecursionError:
        return
    raise AssertionError("expected RecursionError")
