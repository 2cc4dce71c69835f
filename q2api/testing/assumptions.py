"""What the simulated Amazon Q assumes about the real one: one table, read by the simulator, checked by the probe.

Every fact below is a value the simulator is built from (the part that reads it is named in
`played_by`), where it came from (`source`: the section of docs/protocol.md and its mark there) and
the `q2api probe` step that observes it on a real account (`step`; None: no step does yet).
`q2api probe --compare` prints, for each one, what the user's upstream showed: the same, something
different (both values), or nothing (q2api.probe.compare). So a report attached to an issue says
which line of this table to change, and the tests, which all run on the simulator, follow.

The values are the simulator's defaults. A test that wants another behaviour changes the knob the
simulator exposes for it (`sim.reasoning.signature_fragments = 1`, `sim.mcp.nothing_found = …`,
`HostRules.runtime(refuses=…)`), and the probe then reports that fact as different.

Values are plain JSON values: a bool, an int, a string, or a tuple of strings (in a stable order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from q2api.models.table import SERVED_MODELS
from q2api.probe.steps import ProbeStep

FactValue = bool | int | str | tuple[str, ...]

# -- the keys (stable: reports carry them) -----------------------------------------------------------

RUNTIME_TAKES_SOCIAL = "runtime_host.takes_social_token"
RUNTIME_TAKES_IDC = "runtime_host.takes_idc_token"
RUNTIME_TAKES_API_KEY = "runtime_host.takes_api_key"
RUNTIME_REQUIRES_PROFILE = "runtime_host.requires_profile"
RUNTIME_REFUSES_LEGACY_FIELDS = "runtime_host.refuses_legacy_fields"
Q_TAKES_SOCIAL = "q_host.takes_social_token"
Q_TAKES_IDC = "q_host.takes_idc_token"
Q_TAKES_API_KEY = "q_host.takes_api_key"
Q_REQUIRES_PROFILE = "q_host.requires_profile"
BEARER_INVALID_STATUS = "bearer_invalid.status"
BEARER_INVALID_MESSAGE = "bearer_invalid.message"
PROFILE_REQUIRED_STATUS = "profile_required.status"
PROFILE_REQUIRED_MESSAGE = "profile_required.message"
PROFILES_BUILDER_ID_REFUSAL = "profiles.builder_id_refusal"
PROFILES_API_KEY_REFUSAL = "profiles.api_key_refusal"
CATALOGUE_REST_FLAVOUR = "catalogue.rest_flavour"
CATALOGUE_MODEL_IDS = "catalogue.model_ids"
CATALOGUE_CONTEXT_WINDOWS = "catalogue.context_windows"
CATALOGUE_NATIVE_REASONING = "catalogue.native_reasoning_models"
CATALOGUE_REASONING_SCHEMA = "catalogue.reasoning_schema"
CATALOGUE_PROMPT_CACHE = "catalogue.prompt_cache_models"
CREDITS_FIELDS = "credits.fields"
STREAM_CLOSING_EVENTS = "stream.closing_events"
STREAM_METERING_UNIT = "stream.metering_unit"
TOOL_INPUT_IN_FIRST_EVENT = "tool_use.input_in_first_event"
TOOL_STOP_EVENT = "tool_use.stop_event"
REASONING_SIGNATURE_FRAGMENTED = "reasoning.signature_fragmented"
REASONING_SIGNATURE_REPLAY_ACCEPTED = "reasoning.signature_replay_accepted"
CACHE_FIGURES_REPORTED = "cache.figures_reported"
WEB_SEARCH_NOTHING_FOUND = "web_search.nothing_found"
WEB_SEARCH_RESULT_FIELDS = "web_search.result_fields"
LIMIT_BODY_BYTES = "limits.request_body_bytes"
LIMIT_BODY_REFUSAL = "limits.request_body_refusal_reason"
LIMIT_HISTORY_MESSAGES = "limits.history_messages"


@dataclasses.dataclass(frozen=True, slots=True)
class Assumption:
    key: str
    value: FactValue
    source: str  # a section of docs/protocol.md and its mark there, or "simulator's choice" where no source says
    step: ProbeStep | None  # the probe step that observes it
    played_by: str  # the simulator's part that reads it


# The catalogue the simulator serves: q2api's built-in model table (q2api.models.table), as Amazon Q would list it.
_MODEL_IDS = tuple(model.q_model_id for model in SERVED_MODELS)

TABLE: tuple[Assumption, ...] = (
    # -- hosts (docs/protocol.md#hosts) ---------------------------------------------------------------
    Assumption(RUNTIME_TAKES_SOCIAL, True, "docs/protocol.md#hosts (peer)", ProbeStep.HOSTS, "HostRules.runtime"),
    Assumption(
        RUNTIME_TAKES_IDC, False, "docs/protocol.md#hosts (peer, ⚠ disputed)", ProbeStep.HOSTS, "HostRules.runtime"
    ),
    Assumption(
        RUNTIME_TAKES_API_KEY, False, "docs/protocol.md#hosts (peer, ⚠ two peers)", ProbeStep.HOSTS, "HostRules.runtime"
    ),
    Assumption(RUNTIME_REQUIRES_PROFILE, True, "docs/protocol.md#hosts (peer)", ProbeStep.HOSTS, "HostRules.runtime"),
    Assumption(
        RUNTIME_REFUSES_LEGACY_FIELDS, True, "docs/protocol.md#hosts (peer, ⚠ disputed)", None, "HostRules.runtime"
    ),
    Assumption(Q_TAKES_SOCIAL, True, "docs/protocol.md#hosts (peer)", ProbeStep.HOSTS, "HostRules.legacy_q"),
    Assumption(Q_TAKES_IDC, True, "docs/protocol.md#hosts (peer)", ProbeStep.HOSTS, "HostRules.legacy_q"),
    Assumption(Q_TAKES_API_KEY, True, "docs/protocol.md#kiro-api-keys (peer)", ProbeStep.HOSTS, "HostRules.legacy_q"),
    Assumption(Q_REQUIRES_PROFILE, False, "docs/protocol.md#hosts (peer)", ProbeStep.HOSTS, "HostRules.legacy_q"),
    Assumption(BEARER_INVALID_STATUS, 403, "docs/protocol.md#hosts (peer)", ProbeStep.HOSTS, "scripts.bearer_invalid"),
    Assumption(
        BEARER_INVALID_MESSAGE,
        "The bearer token included in the request is invalid.",
        "docs/protocol.md#hosts (peer)",
        ProbeStep.HOSTS,
        "scripts.bearer_invalid",
    ),
    Assumption(
        PROFILE_REQUIRED_STATUS, 400, "docs/protocol.md#profiles (peer)", ProbeStep.HOSTS, "scripts.profile_required"
    ),
    Assumption(
        PROFILE_REQUIRED_MESSAGE,
        "profileArn is required for this request.",
        "docs/protocol.md#profiles (peer)",
        ProbeStep.HOSTS,
        "scripts.profile_required",
    ),
    # -- profiles (docs/protocol.md#profiles) ---------------------------------------------------------
    Assumption(
        PROFILES_BUILDER_ID_REFUSAL,
        "AWS Builder ID is not supported for this operation.",
        "docs/protocol.md#profiles (peer)",
        ProbeStep.PROFILES,
        "SimulatedServices (ListAvailableProfiles)",
    ),
    Assumption(
        PROFILES_API_KEY_REFUSAL,
        "Unsupported token type",
        "docs/protocol.md#profiles (peer)",
        ProbeStep.PROFILES,
        "SimulatedServices (ListAvailableProfiles)",
    ),
    # -- catalogue and credits (docs/protocol.md#model-catalogue, #credits) --------------------------------
    Assumption(
        CATALOGUE_REST_FLAVOUR,
        True,
        "docs/protocol.md#transport (peer)",
        ProbeStep.CATALOGUE,
        "SimulatedServices.flavours",
    ),
    Assumption(
        CATALOGUE_MODEL_IDS, _MODEL_IDS, "q2api's built-in model table", ProbeStep.CATALOGUE, "default_catalogue"
    ),
    Assumption(
        CATALOGUE_CONTEXT_WINDOWS,
        tuple(f"{model.q_model_id}={model.context_window}" for model in SERVED_MODELS),
        "q2api's built-in model table",
        ProbeStep.CATALOGUE,
        "default_catalogue",
    ),
    Assumption(
        CATALOGUE_NATIVE_REASONING,
        ("claude-opus-4.8", "claude-opus-5.5"),
        "docs/protocol.md#native-thinking (peer: Opus 4.8 seen reasoning natively)",
        ProbeStep.CATALOGUE,
        "default_catalogue",
    ),
    Assumption(
        CATALOGUE_REASONING_SCHEMA,
        (
            "max_tokens=1024..64000",
            "output_config.effort=low|medium|high|max",
            "thinking.display=summarized|omitted",
            "thinking.type=adaptive|disabled",
        ),
        "docs/protocol.md#native-thinking (peer)",
        ProbeStep.CATALOGUE,
        "simulated_reasoning.NATIVE_REASONING_SCHEMA",
    ),
    Assumption(
        CATALOGUE_PROMPT_CACHE,
        _MODEL_IDS,
        "simulator's choice (docs/protocol.md#prompt-caching-and-metering: no source)",
        ProbeStep.CATALOGUE,
        "default_catalogue",
    ),
    Assumption(
        CREDITS_FIELDS,
        ("nextDateReset", "subscriptionInfo", "usageBreakdownList"),
        "docs/protocol.md#credits (peer)",
        ProbeStep.CREDITS,
        "simulated_services.usage_document",
    ),
    # -- the reply stream (docs/protocol.md#event-types, #prompt-caching-and-metering) ------------------------
    Assumption(
        STREAM_CLOSING_EVENTS,
        ("metadataEvent", "meteringEvent", "contextUsageEvent"),
        "simulator's choice (docs/protocol.md#prompt-caching-and-metering: order not documented)",
        ProbeStep.TEXT,
        "SimulatedAccounting.closing_order",
    ),
    Assumption(
        STREAM_METERING_UNIT,
        "credit",
        "docs/protocol.md#prompt-caching-and-metering (official shape)",
        ProbeStep.TEXT,
        "SimulatedAccounting.metering_unit",
    ),
    Assumption(
        TOOL_INPUT_IN_FIRST_EVENT,
        False,
        "docs/protocol.md#tool-use-events (official; peer: sometimes true on Kiro)",
        ProbeStep.TOOL_CALL,
        "scripts.tool_use_events",
    ),
    Assumption(
        TOOL_STOP_EVENT,
        True,
        "docs/protocol.md#tool-use-events (official)",
        ProbeStep.TOOL_CALL,
        "scripts.tool_use_events",
    ),
    Assumption(
        REASONING_SIGNATURE_FRAGMENTED,
        True,
        "docs/protocol.md#native-thinking (peer: one report)",
        ProbeStep.THINKING,
        "SimulatedReasoning.signature_fragments",
    ),
    Assumption(
        REASONING_SIGNATURE_REPLAY_ACCEPTED,
        True,
        "docs/protocol.md#native-thinking (peer)",
        ProbeStep.THINKING,
        "SimulatedReasoning.reject_signatures",
    ),
    Assumption(
        CACHE_FIGURES_REPORTED,
        True,
        "docs/protocol.md#prompt-caching-and-metering (official shape; no peer saw Kiro honour a cache point)",
        ProbeStep.CACHE,
        "SimulatedAccounting.reports_cache",
    ),
    # -- web search (docs/protocol.md#web-search) ------------------------------------------------------
    Assumption(
        WEB_SEARCH_NOTHING_FOUND,
        "empty_results",
        "docs/protocol.md#web-search (peer: no captured sample)",
        ProbeStep.WEB_SEARCH,
        "SimulatedMcp.nothing_found",
    ),
    Assumption(
        WEB_SEARCH_RESULT_FIELDS,
        ("domain", "id", "publishedDate", "snippet", "title", "url"),
        "docs/protocol.md#web-search (peer)",
        ProbeStep.WEB_SEARCH,
        "SimulatedMcp.result_fields",
    ),
    # -- limits (docs/protocol.md#limits); played only after `sim.enforce_limits()` ---------------------------
    Assumption(
        LIMIT_BODY_BYTES,
        6_340_000,
        "docs/protocol.md#limits (peer, ⚠ disputed: 1.3 MB, (6.34, 7.34] MB, or tokens)",
        ProbeStep.PAYLOAD_LIMIT,
        "SimulatedUpstream.body_limit",
    ),
    Assumption(
        LIMIT_BODY_REFUSAL,
        "CONTENT_LENGTH_EXCEEDS_THRESHOLD",
        "docs/protocol.md#limits (peer)",
        ProbeStep.PAYLOAD_LIMIT,
        "SimulatedUpstream.body_limit",
    ),
    Assumption(
        LIMIT_HISTORY_MESSAGES,
        198,
        "docs/protocol.md#request-body (peer)",
        ProbeStep.HISTORY_CAP,
        "SimulatedUpstream.history_cap",
    ),
)


class Assumptions(Mapping[str, Assumption]):
    """The table by key, with typed reads for the simulator's parts."""

    def __init__(self, table: tuple[Assumption, ...] = TABLE) -> None:
        self._by_key = {assumption.key: assumption for assumption in table}
        if len(self._by_key) != len(table):
            raise ValueError("a key appears twice in the table of assumptions")

    def __getitem__(self, key: str) -> Assumption:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def flag(self, key: str) -> bool:
        value = self[key].value
        assert isinstance(value, bool), key
        return value

    def number(self, key: str) -> int:
        value = self[key].value
        assert isinstance(value, int) and not isinstance(value, bool), key
        return value

    def text(self, key: str) -> str:
        value = self[key].value
        assert isinstance(value, str), key
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self[key].value
        assert isinstance(value, tuple), key
        return value


SIMULATOR = Assumptions()
