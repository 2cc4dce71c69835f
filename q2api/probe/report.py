"""The probe report: one JSON file a user can attach to an issue (docs/probe.md documents every field).

Redacted by construction: what goes in is built from statuses, shapes, sizes and numbers, and every
text from the upstream passed through the run's Redactor (q2api.probe.redaction); `serialise` then
looks once more for every known secret and text before the file is written.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any
from urllib.parse import urlsplit

import orjson

from q2api import __version__
from q2api.probe.redaction import Redactor
from q2api.probe.steps import ProbeStep

FORMAT = "q2api-probe/1"

# A step's outcome.
DONE = "done"  # it ran and answered its question (the data says what it saw)
FAILED = "failed"  # it ran and its calls failed (the data says how)
SKIPPED = "skipped"  # it did not run: the note says why (budget, no host served, not asked for)
NOT_CLAIMED = "not_claimed"  # the catalogue claims no model with this capability
STOPPED = "stopped"  # the run stopped before it (a suspension-shaped or throttling answer)


@dataclasses.dataclass
class StepReport:
    step: ProbeStep
    outcome: str
    calls: int = 0
    note: str | None = None  # one line for the terminal and the report (no secret, no text)
    data: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step.value, "outcome": self.outcome, "calls": self.calls, "note": self.note, **self.data}


@dataclasses.dataclass
class AccountReport:
    account: str  # the id the store gave the account (never its label: a label may be an e-mail)
    login: str  # social, idc or api_key
    region: str | None
    api_region: str
    has_profile: bool
    profile_region: str | None
    proxy: str | None  # the proxy's scheme (socks5, http), never its address or credentials
    budget: int
    steps: list[StepReport] = dataclasses.field(default_factory=list)
    calls: int = 0
    token_refreshes: int = 0  # refreshes at the token service during the run
    stopped: dict[str, str] | None = None  # {"step", "why"} when the run stopped early

    def step(self, step: ProbeStep) -> StepReport | None:
        return next((report for report in self.steps if report.step is step), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "account": self.account,
            "login": self.login,
            "region": self.region,
            "api_region": self.api_region,
            "has_profile": self.has_profile,
            "profile_region": self.profile_region,
            "proxy": self.proxy,
            "budget": self.budget,
            "calls": self.calls,
            "token_refreshes": self.token_refreshes,
            "stopped": self.stopped,
            "steps": [step.as_dict() for step in self.steps],
        }


@dataclasses.dataclass
class ProbeReport:
    limits: bool
    accounts: list[AccountReport] = dataclasses.field(default_factory=list)
    comparison: list[dict[str, Any]] | None = None  # --compare (q2api.probe.compare)
    created_at: str = dataclasses.field(
        default_factory=lambda: (
            datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        )
    )

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "q2api_version": __version__,
            "created_at": self.created_at,
            "limits": self.limits,
            "accounts": [account.as_dict() for account in self.accounts],
            "comparison": self.comparison,
        }


def host_name(url: str) -> str:
    """A host as the report names it: its name and port, never credentials a URL may carry."""
    parts = urlsplit(url)
    name = parts.hostname or "?"
    return f"{name}:{parts.port}" if parts.port else name


def serialise(report: ProbeReport, redactor: Redactor) -> bytes:
    """The report as indented JSON, after a last look for anything the run's Redactor knows."""
    text = orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode()
    return (redactor.guard(text) + "\n").encode()
