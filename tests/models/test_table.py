"""Claude model ids → Amazon Q model ids, and the served model list."""

from __future__ import annotations

import pytest

from q2api.conversion.claude_converter import ConversionOptions
from q2api.models.table import SERVED_MODELS, ModelChoice, claude_style_id, model_family, resolve_model
from tests.support.converter_helpers import convert, kinds, user


@pytest.mark.parametrize(
    ("requested", "q_id"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4.5"),
        ("claude-sonnet-4-5", "claude-sonnet-4.5"),
        ("claude-sonnet-4.5", "claude-sonnet-4.5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-8", "claude-opus-4.8"),
        ("claude-opus-4-5-20251101", "claude-opus-4.5"),
        ("claude-opus-5-5", "claude-opus-5.5"),
        ("claude-sonnet-5-5", "claude-sonnet-5.5"),
        ("claude-haiku-5-5", "claude-haiku-5.5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4.5"),
        ("claude-3-7-sonnet-20250219", "claude-3.7-sonnet"),
        ("claude-3-7-sonnet-latest", "claude-3.7-sonnet"),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4.5"),
        ("Claude-Opus-4-8", "claude-opus-4.8"),
        ("auto", "auto"),
    ],
)
def test_known_ids(requested, q_id):
    assert resolve_model(requested) == ModelChoice(q_id, 200_000, True)


def test_one_million_suffix_selects_the_long_context_window():
    assert resolve_model("claude-sonnet-4-5[1m]") == ModelChoice("claude-sonnet-4.5", 1_000_000, True)
    assert resolve_model("claude-opus-4-8[1M]") == ModelChoice("claude-opus-4.8", 1_000_000, True)


@pytest.mark.parametrize("requested", ["gpt-4o", "claude-opus-9-9", "", "claude-instant-1"])
def test_unknown_ids_fall_back_to_the_default(requested):
    assert resolve_model(requested, default="claude-opus-4.5") == ModelChoice("claude-opus-4.5", 200_000, False)


def test_default_may_be_a_claude_id():
    assert resolve_model("nope", default="claude-opus-4-8").q_model_id == "claude-opus-4.8"


def test_settings_aliases_extend_and_override_the_table():
    aliases = {"my-model": "claude-sonnet-4", "claude-opus-4-8": "CLAUDE_OPUS_4_8_V1_0"}
    assert resolve_model("my-model", aliases=aliases) == ModelChoice("claude-sonnet-4", 200_000, True)
    assert resolve_model("claude-opus-4-8", aliases=aliases).q_model_id == "CLAUDE_OPUS_4_8_V1_0"
    assert resolve_model("MY-MODEL[1m]", aliases=aliases) == ModelChoice("claude-sonnet-4", 1_000_000, True)


def test_unknown_model_is_reported_by_the_converter():
    conversion = convert(
        [user("hi")],
        model="gpt-4o",
        options=ConversionOptions(conversation_id="c", model=resolve_model("gpt-4o", default="claude-haiku-4.5")),
    )
    assert conversion.model == ModelChoice("claude-haiku-4.5", 200_000, False)
    assert (
        conversion.payload["conversationState"]["currentMessage"]["userInputMessage"]["modelId"] == "claude-haiku-4.5"
    )
    assert "unknown_model" in kinds(conversion)


def test_the_built_in_table():
    ids = [model.id for model in SERVED_MODELS]
    assert len(ids) == len(set(ids))
    for model in SERVED_MODELS:
        assert resolve_model(model.id) == ModelChoice(model.q_model_id, model.context_window, True)
        assert claude_style_id(model.q_model_id) == model.id
        assert model.display_name.startswith("Claude")


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("claude-opus-4.6", ("opus", (4, 6))),
        ("claude-opus-4-6-20260115", ("opus", (4, 6))),
        ("claude-sonnet-4", ("sonnet", (4, 0))),
        ("claude-3.7-sonnet", ("sonnet", (3, 7))),
        ("amazon-nova-lite", None),
        ("auto", None),
    ],
)
def test_model_family(model_id, family):
    assert model_family(model_id) == family


@pytest.mark.parametrize(
    ("upstream_id", "claude_id"),
    [
        ("claude-opus-4.6", "claude-opus-4-6"),
        ("claude-3.7-sonnet", "claude-3-7-sonnet"),
        ("amazon.nova-v1", "amazon.nova-v1"),
    ],
)
def test_claude_style_ids_for_claude_models_only(upstream_id, claude_id):
    assert claude_style_id(upstream_id) == claude_id
