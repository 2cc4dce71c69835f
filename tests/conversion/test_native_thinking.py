"""The thinking request → `additionalModelRequestFields`, from what the model's schema declares (pure)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.amazonq.reasoning_fields import EffortField, ReasoningFields, parse_reasoning_fields
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.native_thinking import reasoning_request_fields, signed_reasoning, without_reasoning
from q2api.testing.simulated_reasoning import NATIVE_REASONING_SCHEMA

CLAUDE = parse_reasoning_fields(NATIVE_REASONING_SCHEMA)
GPT_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {
            "type": "object",
            "properties": {"effort": {"enum": ["low", "medium", "high"], "default": "medium"}},
        }
    },
    "additionalProperties": False,
}


def request(**fields: Any) -> Any:
    return parse_messages_request(
        orjson.dumps({"model": "m", "max_tokens": 4096, "messages": [{"role": "user", "content": "x"}], **fields})
    )


def test_the_schema_is_read_into_the_models_switches() -> None:
    expected = ReasoningFields(
        thinking_types=("adaptive", "disabled"),
        displays=("summarized", "omitted"),
        thinking_keys=frozenset({"type", "display"}),
        effort_field=EffortField.OUTPUT_CONFIG,
        efforts=("low", "medium", "high", "max"),
        default_effort="high",
        max_tokens_range=(1024, 64000),
    )
    assert expected == CLAUDE
    assert CLAUDE.native
    gpt = parse_reasoning_fields(GPT_SCHEMA)
    assert gpt is not None and gpt.effort_field is EffortField.REASONING and gpt.native
    assert parse_reasoning_fields({"type": "object", "properties": {"max_tokens": {}}}) is None
    assert parse_reasoning_fields(None) is None and parse_reasoning_fields("x") is None
    only_off = parse_reasoning_fields({"properties": {"thinking": {"properties": {"type": {"enum": ["disabled"]}}}}})
    assert only_off is not None and not only_off.native


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        ({"thinking": {"type": "adaptive"}}, {"thinking": {"type": "adaptive"}, "max_tokens": 4096}),
        ({"thinking": {"type": "disabled"}}, {"thinking": {"type": "disabled"}}),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}, "max_tokens": 4096},
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 50_000}},
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}, "max_tokens": 4096},
        ),
        (
            {"thinking": {"type": "adaptive", "display": "omitted"}, "output_config": {"effort": "minimal"}},
            {
                "thinking": {"type": "adaptive", "display": "omitted"},
                "output_config": {"effort": "low"},
                "max_tokens": 4096,
            },
        ),
        ({"output_config": {"effort": "medium"}}, {"output_config": {"effort": "medium"}, "max_tokens": 4096}),
        (
            {"thinking": {"type": "adaptive", "display": "nonsense"}},
            {"thinking": {"type": "adaptive"}, "max_tokens": 4096},
        ),
    ],
)
def test_claude_thinking_requests_map_onto_the_schema(fields: dict[str, Any], expected: Any) -> None:
    assert CLAUDE is not None
    assert reasoning_request_fields(request(**fields), CLAUDE) == expected


def test_the_gpt_family_gets_reasoning_effort_only() -> None:
    gpt = parse_reasoning_fields(GPT_SCHEMA)
    assert gpt is not None
    assert reasoning_request_fields(request(thinking={"type": "adaptive"}), gpt) == {"reasoning": {"effort": "medium"}}
    assert reasoning_request_fields(request(output_config={"effort": "max"}), gpt) == {"reasoning": {"effort": "high"}}


@given(
    thinking=st.none()
    | st.fixed_dictionaries(
        {"type": st.sampled_from(["enabled", "adaptive", "disabled"]), "budget_tokens": st.integers(1024, 200_000)}
    ),
    effort=st.none() | st.sampled_from(["minimal", "low", "medium", "high", "xhigh", "max", "weird"]),
    max_tokens=st.integers(1, 500_000),
)
def test_what_is_sent_always_fits_the_schema(thinking: Any, effort: Any, max_tokens: int) -> None:
    import jsonschema

    assert CLAUDE is not None
    fields: dict[str, Any] = {"max_tokens": max_tokens}
    if thinking:
        fields["thinking"] = thinking
    if effort:
        fields["output_config"] = {"effort": effort}
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], **fields}
    sent = reasoning_request_fields(parse_messages_request(orjson.dumps(body)), CLAUDE)
    if sent is not None:
        jsonschema.validate(sent, NATIVE_REASONING_SCHEMA)


def test_only_upstream_signatures_go_back_as_reasoning() -> None:
    assert signed_reasoning("t", "abc") == {"reasoningText": {"text": "t", "signature": "abc"}}
    assert signed_reasoning("t", "q2api.xyz") is None  # ours: made for tag-split thinking
    assert signed_reasoning("t", None) is None and signed_reasoning("t", "") is None


def test_the_retry_body_has_no_reasoning_and_the_original_is_untouched() -> None:
    signed = {"reasoningText": {"text": "t", "signature": "s"}}
    payload: dict[str, Any] = {
        "conversationState": {
            "history": [
                {"userInputMessage": {"content": "a"}},
                {"assistantResponseMessage": {"content": "b", "reasoningContent": signed}},
            ],
            "currentMessage": {"userInputMessage": {"content": "c"}},
        },
        "additionalModelRequestFields": {"thinking": {"type": "adaptive"}},
    }
    retry = without_reasoning(payload)
    assert retry is not None
    assert retry["conversationState"]["history"][1] == {"assistantResponseMessage": {"content": "b"}}
    assert retry["additionalModelRequestFields"] == payload["additionalModelRequestFields"]
    assert payload["conversationState"]["history"][1]["assistantResponseMessage"]["reasoningContent"] == signed
    assert without_reasoning(retry) is None
