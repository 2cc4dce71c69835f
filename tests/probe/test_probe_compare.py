"""`--compare`: the simulator's own defaults are "same" (or not observed), a behaviour a test changes is
"different" with both values, and every fact of the table has an observer."""

from __future__ import annotations

from q2api.probe.compare import DIFFERENT, NOT_OBSERVED, OBSERVERS, SAME, compare, unknown_keys
from q2api.testing import assumptions
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.simulated_services import SIM_IDC_PROFILE_ARN, catalogue_entry, profile_entry
from tests.support.probe_world import probe_world

# Facts the default run cannot observe: --limits' two steps, and one no step probes.
UNOBSERVED_BY_DEFAULT = {
    assumptions.LIMIT_BODY_BYTES,
    assumptions.LIMIT_BODY_REFUSAL,
    assumptions.LIMIT_HISTORY_MESSAGES,
    assumptions.RUNTIME_REFUSES_LEGACY_FIELDS,
}


async def probe_every_login(tmp_path, adjust=None):
    async with probe_world(tmp_path, "runtime", "q") as world:
        if adjust is not None:
            adjust(world)
        world.sim.services.profiles_by_account["refresh-idc"] = [profile_entry(SIM_IDC_PROFILE_ARN)]
        for login in ("social", "idc", "builder_id", "api_key"):
            await world.add(login)
        return await world.probe()


async def test_the_simulators_own_defaults_are_the_same_as_its_table(tmp_path):
    outcome = await probe_every_login(tmp_path)
    rows = {row.key: row for row in compare(SIMULATOR.values(), outcome.report)}
    assert set(rows) == set(SIMULATOR)
    assert {key for key, row in rows.items() if row.verdict == NOT_OBSERVED} == UNOBSERVED_BY_DEFAULT
    different = {key: (row.assumed, row.observed) for key, row in rows.items() if row.verdict == DIFFERENT}
    assert different == {}
    assert rows[assumptions.RUNTIME_TAKES_IDC].observed is False
    assert rows[assumptions.Q_TAKES_API_KEY].observed is True
    assert rows[assumptions.PROFILES_BUILDER_ID_REFUSAL].verdict == SAME


async def test_a_behaviour_a_test_changes_is_different_with_both_values(tmp_path):
    def adjust(world):
        world.sim.reasoning.signature_fragments = 1  # the signature in one piece
        world.sim.mcp.nothing_found = "inner_error"  # an empty search said with an error
        world.hosts["runtime"].refuses_token_kinds = frozenset({"api_key"})  # IdC tokens taken after all
        world.sim.accounting.closing_order = ("meteringEvent", "metadataEvent", "contextUsageEvent")

    outcome = await probe_every_login(tmp_path, adjust)
    rows = {row.key: row for row in compare(SIMULATOR.values(), outcome.report)}
    different = {key: (row.assumed, row.observed) for key, row in rows.items() if row.verdict == DIFFERENT}
    assert different == {
        assumptions.REASONING_SIGNATURE_FRAGMENTED: (True, False),
        assumptions.WEB_SEARCH_NOTHING_FOUND: ("empty_results", "inner_error"),
        assumptions.RUNTIME_TAKES_IDC: (False, True),
        assumptions.STREAM_CLOSING_EVENTS: (
            ["metadataEvent", "meteringEvent", "contextUsageEvent"],
            ["meteringEvent", "metadataEvent", "contextUsageEvent"],
        ),
    }


async def test_accounts_that_disagree_make_a_fact_different_with_every_value(tmp_path):
    """Two accounts whose catalogues differ (plans do): the fact is different, with each value seen."""
    async with probe_world(tmp_path, "q") as world:
        world.sim.services.catalogue_by_account["refresh-one"] = [catalogue_entry("claude-sonnet-4.5")]
        await world.add("idc", label="one", refresh_token="refresh-one")
        await world.add("idc", label="two", refresh_token="refresh-two")
        outcome = await world.probe()
    [row] = [row for row in compare(SIMULATOR.values(), outcome.report) if row.key == assumptions.CATALOGUE_MODEL_IDS]
    assert row.verdict == DIFFERENT
    assert row.observed == [["claude-sonnet-4.5"], sorted(SIMULATOR.names(assumptions.CATALOGUE_MODEL_IDS))]


def test_every_fact_a_step_observes_has_an_observer_and_every_observer_a_fact():
    assert unknown_keys(SIMULATOR.values()) == []
    assert set(OBSERVERS) <= set(SIMULATOR)
