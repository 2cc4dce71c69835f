"""The simulator is built from its table of assumptions: each part's default is the table's value."""

from __future__ import annotations

import pytest

from q2api.amazonq.reasoning_fields import parse_reasoning_fields
from q2api.probe.redaction import Redactor
from q2api.probe.service_steps import reasoning_summary
from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR, Assumption, Assumptions
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_reasoning import NATIVE_REASONING_SCHEMA
from q2api.testing.simulated_services import default_catalogue
from q2api.testing.simulated_upstream import SimulatedUpstream


def test_a_key_appears_once():
    entry = SIMULATOR[assumptions.LIMIT_HISTORY_MESSAGES]
    with pytest.raises(ValueError, match="twice"):
        Assumptions((entry, Assumption(entry.key, 1, "", None, "")))


def test_the_hosts_follow_the_table():
    runtime, q = HostRules.runtime(), HostRules.legacy_q()
    takes = {
        "social": assumptions.RUNTIME_TAKES_SOCIAL,
        "idc": assumptions.RUNTIME_TAKES_IDC,
        "api_key": assumptions.RUNTIME_TAKES_API_KEY,
    }
    assert runtime.refuses_token_kinds == {kind for kind, key in takes.items() if not SIMULATOR.flag(key)}
    assert runtime.requires_profile is SIMULATOR.flag(assumptions.RUNTIME_REQUIRES_PROFILE)
    assert q.refuses_token_kinds == frozenset() and q.requires_profile is False
    assert scripts.bearer_invalid().status == SIMULATOR.number(assumptions.BEARER_INVALID_STATUS)


def test_the_catalogue_follows_the_table():
    catalogue = default_catalogue()
    assert tuple(entry["modelId"] for entry in catalogue) == SIMULATOR.names(assumptions.CATALOGUE_MODEL_IDS)
    native = tuple(sorted(entry["modelId"] for entry in catalogue if "additionalModelRequestFieldsSchema" in entry))
    assert native == SIMULATOR.names(assumptions.CATALOGUE_NATIVE_REASONING)
    fields = parse_reasoning_fields(NATIVE_REASONING_SCHEMA)
    assert fields is not None
    assert reasoning_summary(fields, Redactor()) == SIMULATOR.names(assumptions.CATALOGUE_REASONING_SCHEMA)


def test_the_other_parts_read_their_defaults_there():
    sim = SimulatedUpstream()
    assert sim.reasoning.signature_fragments > 1 and sim.reasoning.reject_signatures is False
    assert sim.accounting.closing_order == SIMULATOR.names(assumptions.STREAM_CLOSING_EVENTS)
    assert sim.mcp.nothing_found == SIMULATOR.text(assumptions.WEB_SEARCH_NOTHING_FOUND)
    assert sim.body_limit is None and sim.history_cap is None  # not enforced unless asked
    sim.enforce_limits()
    assert (sim.body_limit, sim.history_cap) == (6_340_000, 198)
