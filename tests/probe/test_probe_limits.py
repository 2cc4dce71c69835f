"""`--limits` against the simulated limits: the payload limit found by bisection within 5 %, the history
cap found exactly, and the simulator's own limits compared as "same"."""

from __future__ import annotations

import pytest

from q2api.probe.compare import SAME, compare
from q2api.probe.limit_budget import LIMITS_CALLS
from q2api.probe.limit_steps import PAYLOAD_PRECISION
from q2api.probe.runner import ProbeOptions
from q2api.probe.steps import DEFAULT_BUDGET
from q2api.testing import assumptions
from q2api.testing.assumptions import SIMULATOR
from tests.support.probe_world import probe_world

LIMITS = ProbeOptions(limits=True)


@pytest.mark.parametrize("limit", [300_000, 1_234_567])
async def test_the_payload_limit_is_found_within_five_percent(tmp_path, limit):
    async with probe_world(tmp_path, "q") as world:
        world.sim.body_limit = limit
        await world.add("idc")
        outcome = await world.probe(LIMITS)
        largest_seen = max(len(request.raw) for request in world.sim.requests)
    payload = outcome.step("payload_limit")
    accepted, refused = payload["largest_accepted_bytes"], payload["smallest_refused_bytes"]
    assert accepted <= limit < refused
    assert refused / accepted <= PAYLOAD_PRECISION
    assert abs(accepted - limit) / limit <= 0.05
    assert payload["refusal"]["reason"] == "CONTENT_LENGTH_EXCEEDS_THRESHOLD"
    assert largest_seen == max(probe["bytes"] for probe in payload["probes"])  # sizes as sent, to the byte
    assert [probe["outcome"] == "served" for probe in payload["probes"]] == [
        probe["bytes"] <= limit for probe in payload["probes"]
    ]


@pytest.mark.parametrize(("cap", "calls"), [(198, 2), (40, None), (350, None)])
async def test_the_history_cap_is_found_exactly(tmp_path, cap, calls):
    async with probe_world(tmp_path, "q") as world:
        world.sim.body_limit = 300_000  # keeps the payload search short
        world.sim.history_cap = cap
        await world.add("idc")
        outcome = await world.probe(LIMITS)
    history = outcome.step("history_cap")
    assert history["largest_accepted_messages"] == cap
    assert history["smallest_refused_messages"] == cap + 2
    assert history["refusal"]["message"] == "Improperly formed request."
    if calls is not None:
        assert history["calls"] == calls  # the assumed cap holds: confirmed in two calls


async def test_no_refusal_up_to_the_ceiling_is_said_plainly(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        world.sim.body_limit = None
        world.sim.history_cap = None
        await world.add("idc")
        outcome = await world.probe(LIMITS)
    payload = outcome.step("payload_limit")
    assert payload["smallest_refused_bytes"] is None and payload["largest_accepted_bytes"] >= 16 * 1024 * 1024
    assert payload["note"].startswith("no refusal up to")
    history = outcome.step("history_cap")
    assert history["smallest_refused_messages"] is None and history["largest_accepted_messages"] == 1000


async def test_the_simulators_own_limits_are_found_and_compared_as_the_same(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        world.sim.enforce_limits()
        await world.add("idc")
        outcome = await world.probe(LIMITS)
        calls = world.upstream_calls
    rows = {row.key: row for row in compare(SIMULATOR.values(), outcome.report)}
    for key in (assumptions.LIMIT_BODY_BYTES, assumptions.LIMIT_BODY_REFUSAL, assumptions.LIMIT_HISTORY_MESSAGES):
        assert rows[key].verdict == SAME, rows[key]
    assert calls == outcome.account()["calls"] <= DEFAULT_BUDGET + LIMITS_CALLS
