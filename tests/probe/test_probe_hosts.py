"""The hosts step against the simulated hosts: served, a token kind refused, a profile required, a gone
host — for each login kind, with the production client's host shaping and token refresh."""

from __future__ import annotations

import pytest

from q2api.probe.runner import ProbeOptions
from q2api.testing.simulated_services import SIM_IDC_PROFILE_ARN, profile_entry
from tests.support.probe_world import probe_world


async def test_an_idc_login_is_served_by_q_refused_by_runtime_and_finds_a_gone_host(tmp_path):
    async with probe_world(tmp_path, "q", "runtime", "gone") as world:
        await world.add("idc")
        outcome = await world.probe()
        runtime_requests = world.hosts["runtime"].refused
    hosts = {finding["host"].split(":")[-1]: finding for finding in outcome.step("hosts")["hosts"]}
    q, runtime, gone = outcome.step("hosts")["hosts"]
    assert q["kind"] == "q" and q["outcome"] == "served" and q["refuses_token_kind"] is False
    assert q["needs_profile"] is False  # an IdC login without a profile, served: q needs none
    assert runtime["outcome"] == "refused" and runtime["status"] == 403
    assert runtime["error"]["kind"] == "bearer_invalid"
    assert runtime["error"]["message"] == "The bearer token included in the request is invalid."
    assert runtime["error"]["fields"] == ["message", "reason"]  # no error type: the shape the peers quote
    assert runtime["refuses_token_kind"] is True
    # The production client refreshed the token once and repeated the call, as the gateway would.
    assert runtime["calls"] == 2 and runtime_requests == 2
    assert outcome.account()["token_refreshes"] == 1  # a token refreshed in this run has not expired: no second refresh
    assert gone["outcome"] == "unreachable" and gone["refuses_token_kind"] is None
    assert len(hosts) == 3


async def test_a_social_login_is_served_by_runtime_which_needs_its_profile(tmp_path):
    async with probe_world(tmp_path, "runtime", "q") as world:
        await world.add("social")
        outcome = await world.probe()
    runtime, q = outcome.step("hosts")["hosts"]
    assert outcome.account()["has_profile"] is True  # learnt from the Kiro refresh
    assert runtime["sent_profile"] is True and runtime["outcome"] == "served"
    assert runtime["without_profile"]["status"] == 400
    assert runtime["without_profile"]["error"]["message"] == "profileArn is required for this request."
    assert runtime["needs_profile"] is True
    assert q["needs_profile"] is False and q["without_profile"]["outcome"] == "served"
    assert outcome.step("text")["host"] == runtime["host"]  # the generations go where the gateway's would


async def test_an_idc_login_without_a_profile_asks_the_runtime_host_anyway(tmp_path):
    """The gateway never sends such an account to a host that needs a profile; the probe does, to see."""
    async with probe_world(tmp_path, "runtime") as world:
        world.hosts["runtime"].refuses_token_kinds = frozenset()  # a runtime host that takes IdC tokens
        await world.add("idc")
        outcome = await world.probe()
    [runtime] = outcome.step("hosts")["hosts"]
    assert runtime["sent_profile"] is False
    assert runtime["status"] == 400 and runtime["needs_profile"] is True
    assert runtime["refuses_token_kind"] is None  # it never said what it thinks of the token
    assert outcome.step("tool_call")["outcome"] == "skipped"  # no host served: nothing to generate on


async def test_an_api_key_is_served_by_q_and_refused_by_runtime_without_being_marked_dead(tmp_path):
    async with probe_world(tmp_path, "q", "runtime") as world:
        account = await world.add("api_key")
        outcome = await world.probe()
        stored = await world.store.get(account.id)
    q, runtime = outcome.step("hosts")["hosts"]
    assert q["outcome"] == "served" and runtime["refuses_token_kind"] is True
    assert outcome.account()["token_refreshes"] == 0  # a key is never refreshed
    assert stored is not None and stored.status.value == "active"  # observed, not acted on


async def test_an_idc_login_with_a_profile_is_asked_without_it_on_the_hosts_that_served(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        world.sim.services.profiles = [profile_entry(SIM_IDC_PROFILE_ARN)]
        await world.add("idc")
        outcome = await world.probe()
    [q] = outcome.step("hosts")["hosts"]
    assert outcome.account()["has_profile"] is True and outcome.account()["profile_region"] == "us-east-1"
    assert q["sent_profile"] is True and q["needs_profile"] is False
    profiles = outcome.step("profiles")["hosts"]
    assert [entry["profiles"] for entry in profiles] == [1] and profiles[0]["regions"] == ["us-east-1"]


@pytest.mark.parametrize(
    ("login", "message"),
    [("builder_id", "AWS Builder ID is not supported for this operation."), ("api_key", "Unsupported token type")],
)
async def test_the_profile_listing_refusal_of_each_login_kind_is_reported(tmp_path, login, message):
    async with probe_world(tmp_path, "q") as world:
        await world.add(login)
        outcome = await world.probe()
    [entry] = outcome.step("profiles")["hosts"]
    assert entry["outcome"] == "refused" and entry["error"]["status"] == 403
    assert entry["error"]["message"] == message


async def test_one_account_is_probed_when_named(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        await world.add("idc", label="first")
        await world.add("social", label="second")
        outcome = await world.probe(ProbeOptions(account="second"))
    assert [account["login"] for account in outcome.document["accounts"]] == ["social"]
