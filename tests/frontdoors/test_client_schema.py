"""A client's JSON schema is checked within limits: nothing fetched, no backtracking, no endless or runaway work.

Unit tests of q2api.frontdoors.client_schema; tests/server/test_response_format_safety.py runs the same
faults through the gateway with the `openai` SDK.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.frontdoors.client_schema import CompiledSchema, SchemaRefused, compile_client_schema

CATASTROPHIC = "^(a+)+$"
NOT_QUITE = "a" * 34 + "!"  # Python's re: 2^34 steps to say no


def refusal(schema: dict[str, Any]) -> str:
    with pytest.raises(SchemaRefused) as refused:
        compile_client_schema(schema)
    return str(refused.value)


def mismatch_within_a_thread(compiled: CompiledSchema, value: Any, **options: Any) -> str | None:
    """The check run in a thread that must finish: a backtracking engine would still be running long after."""
    outcome: list[str | None] = []
    worker = threading.Thread(target=lambda: outcome.append(compiled.mismatch(value, **options)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the check did not finish"
    return outcome[0]


# -- no retrieval ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference",
    [
        "http://127.0.0.1:9/schema.json",
        "https://example.com/schema.json#/definitions/a",
        "file:///etc/passwd",
        "other.json",
        "../schemas/a.json#/x",
        "//evil.example/x",
        "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
    ],
)
def test_a_reference_outside_the_schema_is_refused(reference: str) -> None:
    message = refusal({"type": "object", "properties": {"a": {"$ref": reference}}})
    assert "points outside the schema" in message and repr(reference) in message


def test_a_reference_relative_to_a_remote_id_is_refused_too() -> None:
    message = refusal({"$id": "http://169.254.169.254/latest/", "properties": {"a": {"$ref": "meta-data"}}})
    assert "'meta-data' points outside the schema" in message


@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_a_reference_that_resolves_nowhere_is_refused(keyword: str) -> None:
    assert "'#/$defs/missing' resolves to nothing" in refusal({keyword: "#/$defs/missing"})


def test_references_inside_the_schema_resolve_even_under_a_remote_id() -> None:
    compiled = compile_client_schema(
        {
            "$id": "https://example.com/tree.json",
            "$defs": {"node": {"type": "object", "properties": {"children": {"items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node",
        }
    )
    assert compiled.mismatch({"children": [{"children": []}]}) is None
    assert compiled.mismatch({"children": [5]}) == (
        "the reply does not match the JSON schema at children/0: 5 is not of type 'object'"
    )


# -- no endless work -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"anyOf": [{"type": "null"}, {"$ref": "#"}]},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
        {"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
    ],
    ids=["itself", "under anyOf", "through allOf", "under not, below a property"],
)
def test_a_reference_cycle_that_never_steps_into_the_value_is_refused(schema: dict[str, Any]) -> None:
    assert "applies itself to the same value without end" in refusal(schema)


def test_a_schema_whose_cost_doubles_per_level_stops_at_the_deadline() -> None:
    levels = 40  # 2^40 evaluations: no machine finishes them
    definitions: dict[str, Any] = {
        f"d{level}": {"anyOf": [{"$ref": f"#/$defs/d{level + 1}"}, {"$ref": f"#/$defs/d{level + 1}"}]}
        for level in range(levels)
    }
    definitions[f"d{levels}"] = {"type": "string"}
    compiled = compile_client_schema({"$defs": definitions, "$ref": "#/$defs/d0"})
    problem = mismatch_within_a_thread(compiled, 5, seconds=0.2)
    assert problem == "the reply could not be checked against the JSON schema within 0.2 s"


def test_a_reply_nested_past_what_the_check_can_follow_is_a_problem_not_a_crash() -> None:
    compiled = compile_client_schema({"$defs": {"n": {"items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"})
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert compiled.mismatch(deep) == "the reply nests too deeply to be checked against the JSON schema"


# -- no backtracking -------------------------------------------------------------------------


def test_a_catastrophic_pattern_answers_at_once() -> None:
    compiled = compile_client_schema({"type": "string", "pattern": CATASTROPHIC})
    assert mismatch_within_a_thread(compiled, NOT_QUITE) == (
        f"the reply does not match the JSON schema at the top level: {NOT_QUITE!r} does not match {CATASTROPHIC!r}"
    )
    assert mismatch_within_a_thread(compiled, "a" * 34) is None


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"patternProperties": {CATASTROPHIC: {"type": "integer"}}}, None),  # the key does not match: no check
        ({"patternProperties": {CATASTROPHIC: {}}, "additionalProperties": False}, "do not match any of the regexes"),
        ({"propertyNames": {"pattern": CATASTROPHIC}}, "does not match"),
        ({"properties": {"x": {"$ref": "#/$defs/p"}}, "$defs": {"p": {"pattern": CATASTROPHIC}}}, "does not match"),
    ],
    ids=["patternProperties", "additionalProperties", "propertyNames", "behind a $ref"],
)
def test_every_keyword_that_matches_a_pattern_matches_without_backtracking(
    schema: dict[str, Any], expected: str | None
) -> None:
    compiled = compile_client_schema(schema)
    problem = mismatch_within_a_thread(compiled, {NOT_QUITE: "text", "x": NOT_QUITE})
    assert problem is None if expected is None else expected in (problem or "")


def test_patterns_still_mean_what_they_say() -> None:
    compiled = compile_client_schema(
        {
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^[a-z]{2}-\\d{3}$"}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert compiled.mismatch({"id": "ab-123", "x-count": 3}) is None
    assert "does not match" in (compiled.mismatch({"id": "AB-123"}) or "")
    assert "is not of type 'integer'" in (compiled.mismatch({"id": "ab-123", "x-count": "3"}) or "")
    assert "'other' does not match any of the regexes: '^x-'" in (compiled.mismatch({"other": 1}) or "")


@pytest.mark.parametrize("pattern", ["(?=a)b", "(?<!a)b", "(a)\\1", "a{1000}{1000}", "(\\p{L}| ){1,500}", "\\Z"])
def test_a_pattern_re2_cannot_compile_is_refused_at_request_time(pattern: str) -> None:
    message = refusal({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}})
    assert f"the pattern {pattern!r} is not supported" in message and "RE2" in message


def test_unevaluated_properties_next_to_pattern_properties_is_refused() -> None:
    # jsonschema matches patternProperties with Python's re when it looks for evaluated properties.
    message = refusal({"patternProperties": {CATASTROPHIC: {}}, "unevaluatedProperties": False})
    assert "unevaluatedProperties together with patternProperties is not supported" in message


# -- one draft, with the limits --------------------------------------------------------------


def test_a_nested_schema_keyword_is_refused() -> None:
    # jsonschema would check that subschema with its own draft-07 class: Python's re, no deadline.
    schema = {"properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": CATASTROPHIC}}}
    assert refusal(schema) == "$schema is only read at the top of the schema"


def test_the_top_schema_keyword_picks_the_draft_and_keeps_the_limits() -> None:
    compiled = compile_client_schema(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"word": {"pattern": CATASTROPHIC}},
            "properties": {"again": {"$ref": "#"}, "word": {"$ref": "#/definitions/word"}},
        }
    )
    problem = mismatch_within_a_thread(compiled, {"again": {"word": NOT_QUITE}})
    assert problem is not None and "does not match" in problem


@pytest.mark.parametrize("declared", ["https://example.com/my-dialect", ["x"], 5])
def test_an_unknown_draft_is_refused(declared: Any) -> None:
    assert "names no JSON Schema draft q2api knows" in refusal({"$schema": declared})


def test_an_invalid_schema_is_refused_with_the_validator_message() -> None:
    assert refusal({"type": "nope"}).startswith("not a valid JSON schema: ")


@settings(max_examples=200, deadline=None)
@given(
    schema=st.recursive(
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["object", "string", "array", "integer"]),
                "$ref": st.sampled_from(["#", "#/$defs/a", "#/properties/x", "#/nope", "http://x/", "a.json"]),
                "pattern": st.sampled_from([CATASTROPHIC, "(?=a)", "^a", "["]),
            },
        ),
        lambda inner: st.fixed_dictionaries(
            {},
            optional={
                "properties": st.dictionaries(st.sampled_from(["x", "y"]), inner, max_size=2),
                "anyOf": st.lists(inner, min_size=1, max_size=2),
                "$defs": st.fixed_dictionaries({"a": inner}),
            },
        ),
        max_leaves=8,
    ),
    value=st.recursive(
        st.none() | st.integers() | st.text(max_size=40) | st.just(NOT_QUITE),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "y", NOT_QUITE]), inner, max_size=3)
        ),
        max_leaves=10,
    ),
)
def test_any_schema_is_refused_cleanly_or_checks_any_value_without_raising(schema: dict[str, Any], value: Any) -> None:
    try:
        compiled = compile_client_schema(schema)
    except SchemaRefused:
        return
    problem = compiled.mismatch(value, seconds=5)
    assert problem is None or problem.startswith("the reply ")
