"""The probe's steps, in the order they run, and the request budget they share.

The names are public (INTERFACE-style: they appear in the report, in the simulator's table of
assumptions and in docs/protocol.md): rename one only with a deprecation path.

Each step says how many calls to Amazon Q it makes at most; the default run's steps share a budget
of DEFAULT_BUDGET calls per account, and a step that no longer fits is skipped (and says so). The
calls counted are those to Amazon Q's hosts — inference, the catalogue and credits, profiles, web
search — not those to the token services (the report counts refreshes apart).
"""

from __future__ import annotations

import enum

DEFAULT_BUDGET = 20


class ProbeStep(enum.StrEnum):
    """The steps, in the order they run: the reading ones first (they cost no credits, and the catalogue
    chooses the models of the generations), then the hosts, then one generation per capability."""

    PROFILES = "profiles"  # ListAvailableProfiles on the profile hosts
    CATALOGUE = "catalogue"  # ListAvailableModels: ids, context windows, native reasoning, cache points
    CREDITS = "credits"  # getUsageLimits
    HOSTS = "hosts"  # a minimal request to each host of the account: served, refused, needs a profile
    TEXT = "text"  # a plain reply (the first serving host's answer to the hosts step: no call of its own)
    TOOL_CALL = "tool_call"  # a tool call, then its result sent back
    THINKING = "thinking"  # native reasoning, then its signature sent back
    CACHE = "cache"  # the same prompt twice with a cache point: are read / write figures reported?
    WEB_SEARCH = "web_search"  # Kiro's MCP web search: a query with results, one meant to find nothing
    PAYLOAD_LIMIT = "payload_limit"  # --limits: the largest body accepted, by bisection within 5 %
    HISTORY_CAP = "history_cap"  # --limits: the most history messages accepted


DEFAULT_STEPS = (
    ProbeStep.PROFILES,
    ProbeStep.CATALOGUE,
    ProbeStep.CREDITS,
    ProbeStep.HOSTS,
    ProbeStep.TEXT,
    ProbeStep.TOOL_CALL,
    ProbeStep.THINKING,
    ProbeStep.CACHE,
    ProbeStep.WEB_SEARCH,
)
LIMIT_STEPS = (ProbeStep.PAYLOAD_LIMIT, ProbeStep.HISTORY_CAP)

# The most calls each step of the default run makes (the hosts step: per host probed).
STEP_CALLS = {
    ProbeStep.HOSTS: 2,  # the request, and its repeat after a refreshed token when the host refused the token
    ProbeStep.PROFILES: 2,  # one per profile host (both API regions)
    ProbeStep.CATALOGUE: 3,  # pages
    ProbeStep.CREDITS: 1,
    ProbeStep.TEXT: 0,
    ProbeStep.TOOL_CALL: 2,
    ProbeStep.THINKING: 2,
    ProbeStep.CACHE: 2,
    ProbeStep.WEB_SEARCH: 2,
}


class RequestBudget:
    """The calls an account's run may still make; steps ask before they start and record what they made."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    @property
    def left(self) -> int:
        return max(self.limit - self.used, 0)

    def allows(self, calls: int) -> bool:
        return calls <= self.left

    def spend(self, calls: int) -> None:
        self.used += calls
