"""One account's run: what the steps share, and how a run stops early.

A run stops at the first answer shaped like a suspension (`TEMPORARILY_SUSPENDED`), throttling or a
used-up quota: probing further would only add to what made the upstream refuse, or hide the account
from the gateway longer. The steps not run say so in the report.
"""

from __future__ import annotations

import dataclasses

from q2api.amazonq.catalogue import CatalogueModel
from q2api.amazonq.hosts import Host
from q2api.probe.answers import ErrorShape
from q2api.probe.exchange import Generation, ProbeUpstream
from q2api.probe.report import AccountReport
from q2api.probe.steps import ProbeStep

# Why a run stopped.
SUSPENDED = "suspended"
THROTTLED = "throttled"
QUOTA = "quota"
NO_TOKEN = "no_token"
_STOPPING_KINDS = {"throttled": THROTTLED, "monthly_quota": QUOTA, "other_quota": QUOTA}


class RunStopped(Exception):
    def __init__(self, step: ProbeStep, why: str, detail: str | None = None) -> None:
        self.step = step
        self.why = why
        self.detail = detail
        super().__init__(f"{step.value}: {why}")


@dataclasses.dataclass
class AccountRun:
    upstream: ProbeUpstream
    report: AccountReport
    hosts: tuple[Host, ...]  # the account's hosts, in the gateway's order for its login kind and region
    model: str  # the model of the generations (the cheapest the catalogue lists, else the configured default)
    answered_host: Host | None = None  # where the catalogue answered (credits are asked there too)
    serving_host: Host | None = None  # the first host that served the hosts step
    text: Generation | None = None  # its answer: the plain text step
    catalogue: list[CatalogueModel] = dataclasses.field(default_factory=list)
    rates: dict[str, float] = dataclasses.field(default_factory=dict)  # model id → rateMultiplier, when listed

    def check(self, step: ProbeStep, error: ErrorShape | None) -> None:
        """Stop the run on an answer shaped like a suspension, throttling or a used-up quota."""
        if error is None:
            return
        if error.suspended:
            raise RunStopped(step, SUSPENDED, error.reason or error.code)
        why = _STOPPING_KINDS.get(error.kind)
        if why is not None:
            raise RunStopped(step, why, error.reason or error.code)

    def cheapest(self, models: list[CatalogueModel]) -> CatalogueModel | None:
        """The model with the lowest rate (the run's model first among equals)."""
        if not models:
            return None
        return min(models, key=lambda model: (self.rates.get(model.model_id, 1.0), model.model_id != self.model))
