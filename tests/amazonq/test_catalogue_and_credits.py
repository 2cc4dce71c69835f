"""`ListAvailableModels` and `getUsageLimits`: parsing, paging, and both wire flavours against the simulator."""

from __future__ import annotations

import pytest

from q2api.amazonq.catalogue import (
    Catalogue,
    CatalogueModel,
    CatalogueSource,
    fetch_catalogue,
    merge_catalogues,
    parse_models_page,
)
from q2api.amazonq.credits import fetch_credits, parse_usage_limits
from q2api.amazonq.errors import UpstreamHTTPError
from q2api.amazonq.service_api import Flavour, ServiceApi
from q2api.amazonq.upstream import create_session
from q2api.models.table import SERVED_MODELS, builtin_catalogue
from q2api.testing import scripts
from q2api.testing.simulated_services import AWS_JSON, REST, catalogue_entry, usage_document
from q2api.testing.simulated_upstream import SimulatedUpstream

PROFILE = "arn:aws:codewhisperer:us-east-1:000000000000:profile/X"


def test_a_models_page_with_missing_and_odd_fields():
    document = {
        "models": [
            catalogue_entry("claude-opus-4.6", name="Claude Opus 4.6", max_input_tokens=1_000_000),
            {"modelId": "bare"},
            {"modelName": "no id"},
            "not an object",
            {"modelId": "text-only", "supportedInputTypes": ["TEXT"], "tokenLimits": {"maxInputTokens": -5}},
        ],
        "defaultModel": {"modelId": "claude-opus-4.6"},
        "nextToken": "abc",
    }
    models, default, next_token = parse_models_page(document)
    assert [model.model_id for model in models] == ["claude-opus-4.6", "bare", "text-only"]
    opus, bare, text_only = models
    assert (opus.display_name, opus.max_input_tokens, opus.input_types) == (
        "Claude Opus 4.6",
        1_000_000,
        {"text", "image"},
    )
    assert (bare.display_name, bare.max_input_tokens, bare.context_window) == ("bare", None, 200_000)
    assert (text_only.input_types, text_only.max_input_tokens) == ({"text"}, None)
    assert (default, next_token) == ("claude-opus-4.6", "abc")
    assert parse_models_page({}) == ([], None, None)


def test_usage_limits_sum_the_breakdown_active_bonuses_and_an_active_trial():
    document = {
        "nextDateReset": 1_800_000_000.0,
        "subscriptionInfo": {"subscriptionTitle": "KIRO PRO+"},
        "usageBreakdownList": [
            {
                "currentUsage": 10,
                "currentUsageWithPrecision": 10.25,
                "usageLimit": 100,
                "bonuses": [
                    {"currentUsage": 5, "usageLimit": 20, "status": "ACTIVE"},
                    {"currentUsage": 50, "usageLimit": 50, "status": "EXPIRED"},
                ],
                "freeTrialInfo": {"currentUsage": 1, "usageLimit": 500, "freeTrialStatus": "ACTIVE"},
            },
            {"currentUsage": 2, "usageLimit": 3},
        ],
    }
    credits = parse_usage_limits(document)
    assert (credits.used, credits.limit, credits.remaining) == (18.25, 623, 604.75)
    assert not credits.exhausted
    assert credits.as_dict() == {
        "subscription": "KIRO PRO+",
        "used": 18.25,
        "limit": 623,
        "resets_at": "2027-01-15T08:00:00Z",
    }
    assert parse_usage_limits({}).as_dict() == {"subscription": None, "used": 0, "limit": 0, "resets_at": None}
    assert not parse_usage_limits({}).exhausted  # no limit known: never "used up"
    assert parse_usage_limits(usage_document(50, 50)).exhausted


def test_merging_catalogues_keeps_each_model_once_and_the_builtin_table_is_the_served_models():
    first = Catalogue((CatalogueModel("a", "A"), CatalogueModel("b", "B")), "a")
    second = Catalogue((CatalogueModel("B", "other B"), CatalogueModel("c", "C")), source=CatalogueSource.LAST_GOOD)
    merged = merge_catalogues([first, second])
    assert [(model.model_id, model.display_name) for model in merged.models] == [("a", "A"), ("b", "B"), ("c", "C")]
    assert (merged.default_model, merged.source) == ("a", CatalogueSource.LIVE)
    builtin = builtin_catalogue()
    assert builtin.ids == tuple(model.q_model_id for model in SERVED_MODELS)
    assert builtin.source is CatalogueSource.BUILT_IN


@pytest.mark.parametrize("flavours", [{REST, AWS_JSON}, {AWS_JSON}])
async def test_the_catalogue_is_read_page_by_page_in_either_flavour(flavours):
    async with SimulatedUpstream() as sim, create_session() as session:
        sim.services.flavours = flavours
        sim.services.page_size = 2
        sim.services.catalogue = [catalogue_entry(f"claude-opus-4.{minor}") for minor in range(5)]
        api = ServiceApi(session, sim.url)
        catalogue = await fetch_catalogue(api, "token", profile_arn=PROFILE, fetched_at=123.0)
        # The flavour the host answered is remembered: the next call goes straight to it.
        await fetch_credits(api, "token", profile_arn=None)

    assert catalogue.ids == tuple(f"claude-opus-4.{minor}" for minor in range(5))
    assert (catalogue.default_model, catalogue.source, catalogue.fetched_at) == (
        "claude-sonnet-4.5",
        CatalogueSource.LIVE,
        123.0,
    )
    answered = [(flavour, params) for flavour, _operation, params in sim.services.requests if flavour in flavours]
    assert [params.get("nextToken") for _flavour, params in answered[:3]] == [None, "2", "4"]
    assert all(params["profileArn"] == PROFILE and params["origin"] == "AI_EDITOR" for _f, params in answered[:3])
    assert answered[3][1] == {"origin": "AI_EDITOR", "resourceType": "AGENTIC_REQUEST"}
    if flavours == {AWS_JSON}:
        assert api.flavour is Flavour.AWS_JSON
        assert [flavour for flavour, _o, _p in sim.services.requests] == [REST, AWS_JSON, AWS_JSON, AWS_JSON, AWS_JSON]
        assert isinstance(answered[0][1]["maxResults"], int)  # a JSON number in the awsJson body
    else:
        assert api.flavour is Flavour.REST


async def test_a_refusal_is_raised_as_the_upstream_error():
    async with SimulatedUpstream() as sim, create_session() as session:
        sim.services.failure = scripts.access_denied()
        with pytest.raises(UpstreamHTTPError) as caught:
            await fetch_catalogue(ServiceApi(session, sim.url), "token", profile_arn=None)
    assert (caught.value.status, caught.value.code) == (403, "AccessDeniedException")
