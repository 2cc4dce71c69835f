"""`ListAvailableProfiles`: an IdC login's profile found in whichever region lists it; Builder ID and
API keys have none, and a refusal or an unreachable host is written down, never raised.

Each simulated upstream plays one region's management host.
"""

from __future__ import annotations

import aiohttp
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.profiles import Profile, parse_profiles_page, profile_hosts, resolve_profile
from q2api.testing.simulated_services import profile_entry
from q2api.testing.simulated_upstream import SimulatedUpstream

US_ARN = "arn:aws:codewhisperer:us-east-1:111111111111:profile/US"
EU_ARN = "arn:aws:codewhisperer:eu-central-1:222222222222:profile/EU"


def listing(sim: SimulatedUpstream, *arns: str) -> None:
    sim.services.profiles = [profile_entry(arn) for arn in arns]


async def test_the_profile_of_the_accounts_region_is_chosen_among_both_regions() -> None:
    async with SimulatedUpstream() as us, SimulatedUpstream() as eu, aiohttp.ClientSession() as session:
        listing(us, US_ARN)
        listing(eu, EU_ARN)
        proxies = AccountProxies(session)
        hosts = [us.url, eu.url]
        assert (await resolve_profile(proxies, hosts, "tok", region="eu-central-1")).arn == EU_ARN
        assert (await resolve_profile(proxies, hosts, "tok", region="us-east-1")).arn == US_ARN
        assert (await resolve_profile(proxies, hosts, "tok", region=None)).arn == US_ARN  # the first listed
        assert us.services.profile_requests == ["tok"] * 3 and eu.services.profile_requests == ["tok"] * 3


async def test_a_refusal_or_an_empty_list_in_one_region_is_not_final() -> None:
    async with SimulatedUpstream() as us, SimulatedUpstream() as eu, aiohttp.ClientSession() as session:
        us.token_accounts["tok"] = "refresh-1"
        us.services.builder_id_accounts = {"refresh-1"}  # a 403 there
        listing(eu, EU_ARN)
        lookup = await resolve_profile(AccountProxies(session), [us.url, eu.url], "tok")
        assert lookup.arn == EU_ARN and lookup.reached
        assert "HTTP 403" in lookup.detail and "1 profile(s)" in lookup.detail


async def test_a_builder_id_login_has_no_profile_and_the_detail_says_why() -> None:
    async with SimulatedUpstream() as sim, aiohttp.ClientSession() as session:
        sim.token_accounts["tok"] = "refresh-1"
        sim.services.builder_id_accounts = {"refresh-1"}
        lookup = await resolve_profile(AccountProxies(session), [sim.url], "tok")
        assert lookup.profile is None and lookup.reached
        assert "AWS Builder ID is not supported for this operation." in lookup.detail
        assert "tok" not in lookup.detail


async def test_a_host_out_of_reach_is_noted_and_the_others_still_asked() -> None:
    async with SimulatedUpstream() as gone:
        dead_url = gone.url
    async with SimulatedUpstream() as sim, aiohttp.ClientSession() as session:
        listing(sim, US_ARN)
        lookup = await resolve_profile(AccountProxies(session), [dead_url, sim.url], "tok", timeout=5)
        assert lookup.arn == US_ARN
        assert "unreachable" in lookup.detail
        alone = await resolve_profile(AccountProxies(session), [dead_url], "tok", timeout=5)
        assert alone.profile is None and not alone.reached


async def test_an_api_key_is_refused_by_the_listing() -> None:
    async with SimulatedUpstream() as sim, aiohttp.ClientSession() as session:
        key = sim.add_api_key("ksk_profile-test")
        listing(sim, US_ARN)
        lookup = await resolve_profile(AccountProxies(session), [sim.url], key)
        assert lookup.profile is None and "HTTP 403" in lookup.detail


@pytest.mark.parametrize(
    ("endpoints", "expected"),
    [
        (
            ["https://q.us-east-1.amazonaws.com/"],
            ("https://management.us-east-1.kiro.dev/", "https://management.eu-central-1.kiro.dev/"),
        ),
        (["https://runtime.eu-central-1.kiro.dev/"], None),
        (["http://127.0.0.1:8000/"], ("http://127.0.0.1:8000/",)),
        (["https://q.us-east-1.amazonaws.com/", "https://relay.lan/"], ("https://relay.lan/",)),
    ],
)
def test_where_profiles_are_asked_for(endpoints: list[str], expected: tuple[str, ...] | None) -> None:
    management = ("https://management.us-east-1.kiro.dev/", "https://management.eu-central-1.kiro.dev/")
    assert profile_hosts(endpoints) == (expected or management)


def test_a_profile_arn_names_its_region() -> None:
    assert Profile(EU_ARN, "eu").region == "eu-central-1"
    assert Profile("not-an-arn", "x").region is None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@given(
    st.one_of(
        _JSON,
        st.fixed_dictionaries({"profiles": st.lists(_JSON | st.fixed_dictionaries({"arn": _JSON}), max_size=4)}),
        st.fixed_dictionaries({"nextToken": _JSON}),
    )
)
def test_any_json_answer_reads_as_profiles_or_a_value_error(document: object) -> None:
    try:
        profiles, next_token = parse_profiles_page(orjson.dumps(document))
    except ValueError:
        assert not isinstance(document, dict)
        return
    assert all(isinstance(profile.arn, str) and profile.arn for profile in profiles)
    assert next_token is None or isinstance(next_token, str)
