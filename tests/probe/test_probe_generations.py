"""One generation per capability against the simulated Amazon Q: what each step reports, and that the
default run stays within its request budget, counted at the simulator."""

from __future__ import annotations

import pytest

from q2api.probe.runner import ProbeOptions
from q2api.probe.steps import DEFAULT_BUDGET
from q2api.testing.simulated_services import catalogue_entry
from tests.support.probe_world import model_like_reply, probe_world


@pytest.mark.parametrize("login", ["social", "idc", "builder_id", "api_key"])
async def test_the_default_run_stays_within_its_budget_on_three_hosts(tmp_path, login):
    async with probe_world(tmp_path, "runtime", "q", "other") as world:
        await world.add(login)
        outcome = await world.probe()
        calls = world.upstream_calls
    account = outcome.account()
    assert calls <= DEFAULT_BUDGET
    assert account["calls"] == calls  # the report counts what reached the upstream
    assert sum(step["calls"] for step in account["steps"]) == calls
    assert account["stopped"] is None
    skipped = [step["step"] for step in account["steps"] if step["outcome"] not in ("done", "not_claimed")]
    assert skipped == []


async def test_a_smaller_budget_skips_steps_and_says_so(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        await world.add("idc")
        outcome = await world.probe(ProbeOptions(budget=8))
        calls = world.upstream_calls
    assert calls <= 8
    outcomes = {step["step"]: (step["outcome"], step["note"]) for step in outcome.account()["steps"]}
    assert outcomes["web_search"] == ("skipped", "request budget")


async def test_each_capability_is_reported_as_shapes(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        await world.add("idc")
        outcome = await world.probe()
    text = outcome.step("text")
    assert [event["kind"] for event in text["events"]] == [
        "messageMetadataEvent",
        "assistantResponseEvent",
        "metadataEvent",
        "meteringEvent",
        "contextUsageEvent",
    ]
    assert text["closing_events"] == ["metadataEvent", "meteringEvent", "contextUsageEvent"]
    assert text["metering"]["unit"] == "credit" and text["metering"]["usage"] > 0
    assert set(text["token_usage"]) == {"uncachedInputTokens", "outputTokens", "totalTokens"}

    tool = outcome.step("tool_call")
    assert tool["call"] == {
        "calls": 1,
        "named_tool": True,
        "input_in_first_event": False,
        "stop_event": True,
        "input_is_object": True,
        "event_fields": [["input", "name", "stop", "toolUseId"]],
    }
    assert tool["second"]["outcome"] == "served"

    thinking = outcome.step("thinking")
    assert thinking["model"] in ("claude-opus-4.8", "claude-opus-5.5")
    assert thinking["fields_sent"] == ["max_tokens", "output_config.effort", "thinking.type"]
    assert thinking["reasoning"]["signature_frames"] == 3 and thinking["reasoning"]["redacted"] is False
    assert thinking["second"]["outcome"] == "served"  # the signature, sent back, was accepted

    cache = outcome.step("cache")
    assert cache["write_reported"] and cache["read_reported"] and cache["read_on_second_call"]
    assert (
        cache["second"]["token_usage"]["cacheReadInputTokens"] == cache["first"]["token_usage"]["cacheWriteInputTokens"]
    )

    search = outcome.step("web_search")
    assert search["found"]["answer"] == "results" and search["found"]["results"] == 3
    assert search["found"]["result_fields"] == ["domain", "id", "publishedDate", "snippet", "title", "url"]
    assert search["nothing"]["answer"] == "empty_results" and search["nothing"]["results"] == 0


async def test_a_signature_the_upstream_refuses_and_a_search_without_results_are_reported(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        world.sim.reasoning.reject_signatures = True
        world.sim.mcp.mode = "empty"  # this upstream's search finds nothing at all
        await world.add("idc")
        outcome = await world.probe()
    second = outcome.step("thinking")["second"]
    assert second["outcome"] == "refused" and second["error"]["reason"] == "THINKING_SIGNATURE_INVALID"
    assert outcome.step("thinking")["outcome"] == "failed"
    search = outcome.step("web_search")
    assert search["found"]["answer"] == "empty_results" and search["nothing"]["answer"] == "empty_results"


async def test_capabilities_the_catalogue_does_not_claim_are_not_tried(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        entry = catalogue_entry("claude-sonnet-4.5")
        entry["supportsPromptCache"] = False
        world.sim.services.catalogue = [entry]
        await world.add("idc")
        outcome = await world.probe()
        calls = world.upstream_calls
    assert outcome.step("thinking")["outcome"] == "not_claimed"
    assert outcome.step("cache")["outcome"] == "not_claimed"
    assert outcome.step("thinking")["calls"] == outcome.step("cache")["calls"] == 0
    assert calls == outcome.account()["calls"]


async def test_the_generations_use_the_cheapest_model_listed(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        cheap, dear = catalogue_entry("claude-haiku-4.5"), catalogue_entry("claude-sonnet-4.5")
        cheap["rateMultiplier"], dear["rateMultiplier"] = 0.4, 1.3
        world.sim.services.catalogue = [dear, cheap]
        await world.add("idc")
        outcome = await world.probe()
        models = {
            request.body["conversationState"]["currentMessage"]["userInputMessage"].get("modelId")
            for request in world.sim.requests
        }
    assert outcome.step("catalogue")["probe_model"] == "claude-haiku-4.5"
    assert models == {"claude-haiku-4.5"}


@pytest.mark.parametrize(("failure", "why"), [("suspended", "suspended"), ("throttled", "throttled")])
async def test_the_run_stops_at_the_first_suspension_or_throttling(tmp_path, failure, why):
    from q2api.testing import scripts

    async with probe_world(tmp_path, "q") as world:
        await world.add("idc")
        reply = scripts.access_denied() if failure == "suspended" else scripts.throttled()
        world.sim.responder = lambda record: reply
        outcome = await world.probe()
        calls = world.upstream_calls
        stored = await world.store.accounts()
    account = outcome.account()
    assert account["stopped"] == {
        "step": "hosts",
        "why": why,
        "detail": "TEMPORARILY_SUSPENDED" if failure == "suspended" else "ThrottlingException",
    }
    outcomes = {step["step"]: step["outcome"] for step in account["steps"]}
    assert {outcomes[step] for step in ("text", "tool_call", "thinking", "cache", "web_search")} == {"stopped"}
    assert calls == account["calls"] == 1 + 3 + 1 + 1  # profiles (one host), catalogue, credits, the refused call
    assert stored[0].status.value == "active"  # the probe observes; the gateway decides on its own answers


async def test_one_request_at_a_time_whatever_the_in_flight_cap(tmp_path):
    async with probe_world(tmp_path, "runtime", "q") as world:
        others_in_flight: list[int] = []

        def watching(record):
            others_in_flight.append(world.sim.active_streams)
            return model_like_reply(record)

        world.sim.responder = watching
        await world.add("social")
        await world.probe(Q2API_ACCOUNT_MAX_INFLIGHT="1")
    assert len(others_in_flight) > 5 and set(others_in_flight) == {0}


async def test_an_account_that_rests_or_needs_a_login_is_not_probed(tmp_path):
    import time

    from q2api.accounts.records import AccountRest, AccountStatus

    async with probe_world(tmp_path, "q") as world:
        resting = await world.add("idc", label="resting", refresh_token="refresh-resting")
        dead = await world.add("social", label="dead", refresh_token="refresh-dead")
        await world.store.add_rests({resting.id: AccountRest(time.time() + 600, "throttled")})
        await world.store.set_status(dead.id, AccountStatus.NEEDS_LOGIN, "refresh token rejected")
        outcome = await world.probe()
        calls = world.upstream_calls
        refreshes = world.sim.refresh_calls
    assert [account["stopped"]["why"] for account in outcome.document["accounts"]] == ["resting", "needs_login"]
    assert [account["steps"] for account in outcome.document["accounts"]] == [[], []]
    assert calls == refreshes == 0
    assert any("rests (throttled) until" in line for line in outcome.progress)
