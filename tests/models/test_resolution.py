"""Claude model ids resolved against a live catalogue: every spelling of a catalogue model finds it,
an unknown id follows the policy, and nothing outside the catalogue is ever chosen."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.amazonq.catalogue import Catalogue, CatalogueModel
from q2api.models.resolution import (
    ModelNotAvailable,
    UnknownModelPolicy,
    resolve_against_catalogue,
)
from q2api.models.table import claude_style_id, model_family

CATALOGUE = Catalogue(
    (
        CatalogueModel("claude-opus-4.5", "Opus 4.5", 200_000, 32_000),
        CatalogueModel("claude-opus-4.6", "Opus 4.6", 1_000_000, 128_000),
        CatalogueModel("claude-sonnet-4.5", "Sonnet 4.5", 200_000, 64_000),
        CatalogueModel("claude-3.7-sonnet", "Sonnet 3.7", 200_000, 8_000),
        CatalogueModel("amazon-nova-lite", "Nova Lite", 300_000, 10_000, frozenset({"text"})),
        CatalogueModel("tiny-coder-v1", "Tiny", 32_000, 4_000, frozenset({"text"})),
    ),
    default_model="claude-sonnet-4.5",
)


def resolve(requested: str, **options):
    return resolve_against_catalogue(requested, CATALOGUE, **options)


@pytest.mark.parametrize(
    ("requested", "upstream"),
    [
        ("claude-opus-4-6", "claude-opus-4.6"),
        ("claude-opus-4-6[1m]", "claude-opus-4.6"),
        ("claude-opus-4.6", "claude-opus-4.6"),
        ("claude-opus-4-6-20260115", "claude-opus-4.6"),
        ("claude-opus-4-6-latest", "claude-opus-4.6"),
        ("anthropic.claude-opus-4-6-v1:0", "claude-opus-4.6"),
        ("global.anthropic.claude-opus-4-6-20260115-v1:0", "claude-opus-4.6"),
        ("claude-3-7-sonnet-latest", "claude-3.7-sonnet"),
        ("claude-3-7-sonnet-20250219", "claude-3.7-sonnet"),
        ("Amazon-Nova-Lite", "amazon-nova-lite"),
        ("tiny-coder-v1", "tiny-coder-v1"),  # a version suffix that is part of a non-Claude id
    ],
)
def test_spellings_of_catalogue_models(requested, upstream):
    resolution = resolve(requested)
    assert (resolution.choice.q_model_id, resolution.substituted, resolution.choice.known) == (upstream, False, True)


def test_the_choice_carries_what_the_catalogue_says():
    choice = resolve("amazon-nova-lite").choice
    assert (choice.context_window, choice.max_output_tokens, choice.input_types) == (300_000, 10_000, {"text"})
    assert resolve("claude-opus-4-6[1m]").choice.context_window == 1_000_000


def test_aliases_point_at_catalogue_models_and_win():
    aliases = {"team-default": "claude-opus-4.6", "claude-opus-4-5": "claude-sonnet-4-5", "tiny": "tiny-coder-v1"}
    assert resolve("tiny", aliases=aliases).choice.q_model_id == "tiny-coder-v1"
    assert resolve("team-default", aliases=aliases).choice.q_model_id == "claude-opus-4.6"
    assert resolve("TEAM-DEFAULT[1m]", aliases=aliases).choice.q_model_id == "claude-opus-4.6"
    assert resolve("claude-opus-4-5", aliases=aliases).choice.q_model_id == "claude-sonnet-4.5"


def test_family_policy_takes_the_newest_of_the_family_and_says_so():
    resolution = resolve("claude-opus-9-9")
    assert (resolution.choice.q_model_id, resolution.substituted, resolution.choice.known) == (
        "claude-opus-4.6",
        True,
        False,
    )
    assert resolve("claude-sonnet-5-5-20260101").choice.q_model_id == "claude-sonnet-4.5"  # 4.5 beats 3.7


def test_family_policy_without_that_family_or_any_family_raises_with_the_listing():
    for requested in ("claude-haiku-4-5", "gpt-4o", "", "claude-instant-1"):
        with pytest.raises(ModelNotAvailable) as caught:
            resolve(requested)
        assert caught.value.available == (
            "claude-opus-4-5",
            "claude-opus-4-6",
            "claude-sonnet-4-5",
            "claude-3-7-sonnet",
            "amazon-nova-lite",
            "tiny-coder-v1",
        )
        assert "claude-opus-4-6, claude-sonnet-4-5" in str(caught.value)


def test_reject_policy_raises_and_default_policy_takes_the_default():
    with pytest.raises(ModelNotAvailable):
        resolve("claude-opus-9-9", policy=UnknownModelPolicy.REJECT)
    by_default = resolve("gpt-4o", policy=UnknownModelPolicy.DEFAULT, default_model="amazon-nova-lite")
    assert (by_default.choice.q_model_id, by_default.substituted) == ("amazon-nova-lite", True)
    # Without a configured default: the catalogue's.
    assert resolve("gpt-4o", policy=UnknownModelPolicy.DEFAULT).choice.q_model_id == "claude-sonnet-4.5"
    with pytest.raises(ModelNotAvailable):
        resolve("gpt-4o", policy=UnknownModelPolicy.DEFAULT, default_model="claude-opus-9")


# -- properties ----------------------------------------------------------------------

families = st.sampled_from(["opus", "sonnet", "haiku"])
versions = st.tuples(st.integers(1, 12), st.integers(0, 9))


@st.composite
def catalogues(draw) -> Catalogue:
    entries = draw(st.lists(st.tuples(families, versions), min_size=1, max_size=8, unique=True))
    models = tuple(CatalogueModel(f"claude-{family}-{major}.{minor}", family) for family, (major, minor) in entries)
    return Catalogue(models)


@st.composite
def spellings(draw, model_id: str) -> str:
    """Some spelling a client may send for a catalogue id `claude-<family>-<major>.<minor>`."""
    name = draw(st.sampled_from([model_id, model_id.replace(".", "-")]))
    if draw(st.booleans()):
        name += draw(st.sampled_from(["-20250929", "-20260115-v1:0", "-latest", "-v2"]))
    if draw(st.booleans()):
        name = draw(st.sampled_from(["anthropic.", "us.anthropic.", "eu.anthropic."])) + name
    if draw(st.booleans()):
        name = name.upper() if draw(st.booleans()) else name.title()
    if draw(st.booleans()):
        name += draw(st.sampled_from(["[1m]", "[1M]"]))
    return name


@given(st.data(), catalogues())
def test_every_spelling_of_a_catalogue_model_finds_exactly_it(data, catalogue):
    model = data.draw(st.sampled_from(catalogue.models))
    requested = data.draw(spellings(model.model_id))
    for policy in UnknownModelPolicy:
        resolution = resolve_against_catalogue(requested, catalogue, policy=policy)
        assert resolution.choice.q_model_id == model.model_id, requested
        assert not resolution.substituted


@given(catalogues(), families, versions)
def test_an_unknown_id_of_a_family_gets_the_newest_of_that_family_or_a_404(catalogue, family, version):
    requested = f"claude-{family}-{version[0]}-{version[1]}"
    try:
        resolution = resolve_against_catalogue(requested, catalogue)
    except ModelNotAvailable as missing:
        assert not any(model_family(model_id)[0] == family for model_id in catalogue.ids)
        assert missing.available == tuple(claude_style_id(model_id) for model_id in catalogue.ids)
        return
    chosen = resolution.choice.q_model_id
    assert chosen in catalogue
    assert model_family(chosen)[0] == family
    if resolution.substituted:
        newest = max(model_family(model_id)[1] for model_id in catalogue.ids if model_family(model_id)[0] == family)
        assert model_family(chosen)[1] == newest
    else:
        assert model_family(chosen)[1] == version  # it was in the catalogue after all


@given(catalogues(), st.text(max_size=40), st.sampled_from(list(UnknownModelPolicy)))
def test_nothing_outside_the_catalogue_is_ever_chosen(catalogue, requested, policy):
    try:
        resolution = resolve_against_catalogue(requested, catalogue, policy=policy, default_model="claude-opus-1.0")
    except ModelNotAvailable:
        return
    assert resolution.choice.q_model_id in catalogue
    # Never a silent swap: a model other than the one asked for is always flagged.
    if not resolution.substituted:
        assert resolution.choice.known
    if policy is UnknownModelPolicy.REJECT:
        assert not resolution.substituted


upstream_ids = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9.]{1,6}){0,3}(-v[0-9])?(-[0-9]{8})?", fullmatch=True)


@given(st.lists(upstream_ids, min_size=1, max_size=6, unique=True), st.data())
def test_any_catalogue_id_sent_as_it_is_finds_exactly_that_model(ids, data):
    catalogue = Catalogue(tuple(CatalogueModel(model_id, model_id) for model_id in ids))
    model_id = data.draw(st.sampled_from(ids))
    resolution = resolve_against_catalogue(model_id, catalogue, policy=UnknownModelPolicy.REJECT)
    assert resolution.choice.q_model_id == model_id and not resolution.substituted
