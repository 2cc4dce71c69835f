"""`--compare`: for each fact the simulator assumes (q2api.testing.assumptions), what the probed upstream
showed — the same, something different (both values), or nothing (not observed).

The facts come in as plain data (`Assumed`: a key, a value, a source, the step that observes it), so
this module never imports the simulator; each key has an observer here that reads its value out of a
report. A fact several accounts observed differently is "different", with every value seen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from q2api.probe.report import AccountReport, ProbeReport
from q2api.probe.steps import ProbeStep

SAME = "same"
DIFFERENT = "different"
NOT_OBSERVED = "not_observed"


class Assumed(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def value(self) -> Any: ...

    @property
    def source(self) -> str: ...

    @property
    def step(self) -> ProbeStep | None: ...


Observe = Callable[[AccountReport], Iterable[Any]]
Judge = Callable[[Any, Any], bool]


@dataclasses.dataclass(frozen=True)
class Observer:
    observe: Observe
    unordered: bool = False  # a tuple whose order means nothing (compared sorted)
    judge: Judge | None = None  # same-ness when it is not equality (a limit within a range)
    show: Callable[[Any], Any] | None = None  # the observed value as the report prints it


@dataclasses.dataclass(frozen=True)
class Comparison:
    key: str
    assumed: Any
    observed: Any  # the value seen, a list of values when accounts disagree, None when not observed
    verdict: str
    source: str
    step: str | None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def compare(assumptions: Iterable[Assumed], report: ProbeReport) -> list[Comparison]:
    rows = []
    for assumption in assumptions:
        observer = OBSERVERS.get(assumption.key)
        seen: list[Any] = []
        if observer is not None:
            for account in report.accounts:
                for value in observer.observe(account):
                    normal = _normal(value, observer.unordered)
                    if normal not in seen:
                        seen.append(normal)
        assumed = _normal(assumption.value, observer.unordered if observer else False)
        step = assumption.step.value if assumption.step else None
        if not seen:
            rows.append(Comparison(assumption.key, _plain(assumed), None, NOT_OBSERVED, assumption.source, step))
            continue
        judge = observer.judge if observer and observer.judge else _equal
        verdict = SAME if all(judge(assumed, value) for value in seen) else DIFFERENT
        show = observer.show if observer and observer.show else _plain
        shown = [show(value) for value in seen]
        observed = shown[0] if len(shown) == 1 else shown
        rows.append(Comparison(assumption.key, _plain(assumed), observed, verdict, assumption.source, step))
    return rows


def unknown_keys(assumptions: Iterable[Assumed]) -> list[str]:
    """Facts no observer reads (a table entry added without teaching the probe to see it)."""
    return [
        assumption.key for assumption in assumptions if assumption.step is not None and assumption.key not in OBSERVERS
    ]


# -- reading a report ---------------------------------------------------------------------------------


def _data(account: AccountReport, step: ProbeStep) -> dict[str, Any]:
    report = account.step(step)
    return report.data if report is not None else {}


def _host_findings(account: AccountReport, host_kind: str) -> list[dict[str, Any]]:
    return [finding for finding in _data(account, ProbeStep.HOSTS).get("hosts", ()) if finding.get("kind") == host_kind]


def _takes(host_kind: str, login: str) -> Observe:
    def observe(account: AccountReport) -> Iterable[bool]:
        if account.login != login:
            return []
        return [
            not finding["refuses_token_kind"]
            for finding in _host_findings(account, host_kind)
            if finding.get("refuses_token_kind") is not None
        ]

    return observe


def _requires_profile(host_kind: str) -> Observe:
    def observe(account: AccountReport) -> Iterable[bool]:
        return [
            finding["needs_profile"]
            for finding in _host_findings(account, host_kind)
            if finding.get("needs_profile") is not None
        ]

    return observe


def _errors(account: AccountReport) -> Iterable[dict[str, Any]]:
    for finding in _data(account, ProbeStep.HOSTS).get("hosts", ()):
        for answer in (finding, finding.get("without_profile") or {}):
            if answer.get("error"):
                yield answer["error"]


def _bearer_invalid(field: str) -> Observe:
    return lambda account: [error[field] for error in _errors(account) if error.get("kind") == "bearer_invalid"]


def _profile_required(field: str) -> Observe:
    def observe(account: AccountReport) -> Iterable[Any]:
        values = []
        for finding in _data(account, ProbeStep.HOSTS).get("hosts", ()):
            if finding.get("needs_profile") is not True:
                continue
            answer = finding.get("without_profile") or finding
            if answer.get("error"):
                values.append(answer["error"][field])
        return values

    return observe


def _profile_refusal(login: str) -> Observe:
    def observe(account: AccountReport) -> Iterable[str]:
        if account.login != login:
            return []
        entries = _data(account, ProbeStep.PROFILES).get("hosts", ())
        return [
            entry["error"]["message"] for entry in entries if entry.get("error") and entry["error"]["status"] == 403
        ]

    return observe


def _catalogue(read: Callable[[dict[str, Any]], Any]) -> Observe:
    def observe(account: AccountReport) -> Iterable[Any]:
        data = _data(account, ProbeStep.CATALOGUE)
        return [read(data)] if data.get("models") else []

    return observe


def _reasoning_schemas(account: AccountReport) -> Iterable[tuple[str, ...]]:
    models = _data(account, ProbeStep.CATALOGUE).get("models") or ()
    return [tuple(model["reasoning_schema"]) for model in models if model.get("native_reasoning")]


def _one(step: ProbeStep, read: Callable[[dict[str, Any]], Any]) -> Observe:
    """The value `read` finds in the step's data, unless it finds None."""

    def observe(account: AccountReport) -> Iterable[Any]:
        data = _data(account, step)
        value = read(data) if data else None
        return [] if value is None else [value]

    return observe


def _signature_fragmented(data: dict[str, Any]) -> bool | None:
    frames = (data.get("reasoning") or {}).get("signature_frames") or 0
    return frames > 1 if frames else None


def _replay_accepted(data: dict[str, Any]) -> bool | None:
    second = data.get("second")
    if not second:
        return None
    if second.get("outcome") == "served":
        return True
    reason = (second.get("error") or {}).get("reason")
    return False if reason == "THINKING_SIGNATURE_INVALID" else None


def _cache_reported(data: dict[str, Any]) -> bool | None:
    if (data.get("second") or {}).get("outcome") != "served":
        return None
    return bool(data.get("read_reported") or data.get("write_reported"))


def _nothing_found(data: dict[str, Any]) -> str | None:
    nothing = data.get("nothing") or {}
    return nothing.get("answer") if nothing.get("outcome") == "served" else None


def _result_fields(data: dict[str, Any]) -> tuple[str, ...] | None:
    found = data.get("found") or {}
    return tuple(found["result_fields"]) if found.get("answer") == "results" else None


def _within(assumed: Any, observed: Any) -> bool:
    """A limit (`assumed`) lies between the largest accepted and the smallest refused value."""
    accepted, refused = observed
    return accepted <= assumed and (refused is None or assumed < refused)


def _show_range(observed: Any) -> Any:
    accepted, refused = observed
    return {"largest_accepted": accepted, "smallest_refused": refused}


def _limit(step: ProbeStep, accepted_key: str, refused_key: str) -> Observe:
    def observe(account: AccountReport) -> Iterable[Any]:
        data = _data(account, step)
        if data.get(accepted_key) is None:
            return []
        return [(data[accepted_key], data.get(refused_key))]

    return observe


def _refusal_reason(data: dict[str, Any]) -> str | None:
    refusal = data.get("refusal") or {}
    return refusal.get("reason") or refusal.get("code") or refusal.get("message")


OBSERVERS: dict[str, Observer] = {
    "runtime_host.takes_social_token": Observer(_takes("runtime", "social")),
    "runtime_host.takes_idc_token": Observer(_takes("runtime", "idc")),
    "runtime_host.takes_api_key": Observer(_takes("runtime", "api_key")),
    "runtime_host.requires_profile": Observer(_requires_profile("runtime")),
    "q_host.takes_social_token": Observer(_takes("q", "social")),
    "q_host.takes_idc_token": Observer(_takes("q", "idc")),
    "q_host.takes_api_key": Observer(_takes("q", "api_key")),
    "q_host.requires_profile": Observer(_requires_profile("q")),
    "bearer_invalid.status": Observer(_bearer_invalid("status")),
    "bearer_invalid.message": Observer(_bearer_invalid("message")),
    "profile_required.status": Observer(_profile_required("status")),
    "profile_required.message": Observer(_profile_required("message")),
    "profiles.builder_id_refusal": Observer(_profile_refusal("idc")),
    "profiles.api_key_refusal": Observer(_profile_refusal("api_key")),
    "catalogue.rest_flavour": Observer(
        _one(ProbeStep.CATALOGUE, lambda data: {"rest": True, "aws_json": False}.get(data.get("flavour") or ""))
    ),
    "catalogue.model_ids": Observer(
        _catalogue(lambda data: tuple(model["id"] for model in data["models"])), unordered=True
    ),
    "catalogue.context_windows": Observer(
        _catalogue(lambda data: tuple(f"{model['id']}={model['context_window']}" for model in data["models"])),
        unordered=True,
    ),
    "catalogue.native_reasoning_models": Observer(
        _catalogue(lambda data: tuple(model["id"] for model in data["models"] if model["native_reasoning"])),
        unordered=True,
    ),
    "catalogue.reasoning_schema": Observer(_reasoning_schemas, unordered=True),
    "catalogue.prompt_cache_models": Observer(
        _catalogue(lambda data: tuple(model["id"] for model in data["models"] if model["prompt_cache"])), unordered=True
    ),
    "credits.fields": Observer(
        _one(ProbeStep.CREDITS, lambda data: tuple(data["fields"]) if "fields" in data else None), unordered=True
    ),
    "stream.closing_events": Observer(
        _one(ProbeStep.TEXT, lambda data: tuple(data["closing_events"]) if "closing_events" in data else None)
    ),
    "stream.metering_unit": Observer(_one(ProbeStep.TEXT, lambda data: (data.get("metering") or {}).get("unit"))),
    "tool_use.input_in_first_event": Observer(
        _one(ProbeStep.TOOL_CALL, lambda data: (data.get("call") or {}).get("input_in_first_event"))
    ),
    "tool_use.stop_event": Observer(_one(ProbeStep.TOOL_CALL, lambda data: (data.get("call") or {}).get("stop_event"))),
    "reasoning.signature_fragmented": Observer(_one(ProbeStep.THINKING, _signature_fragmented)),
    "reasoning.signature_replay_accepted": Observer(_one(ProbeStep.THINKING, _replay_accepted)),
    "cache.figures_reported": Observer(_one(ProbeStep.CACHE, _cache_reported)),
    "web_search.nothing_found": Observer(_one(ProbeStep.WEB_SEARCH, _nothing_found)),
    "web_search.result_fields": Observer(_one(ProbeStep.WEB_SEARCH, _result_fields), unordered=True),
    "limits.request_body_bytes": Observer(
        _limit(ProbeStep.PAYLOAD_LIMIT, "largest_accepted_bytes", "smallest_refused_bytes"),
        judge=_within,
        show=_show_range,
    ),
    "limits.request_body_refusal_reason": Observer(_one(ProbeStep.PAYLOAD_LIMIT, _refusal_reason)),
    "limits.history_messages": Observer(
        _limit(ProbeStep.HISTORY_CAP, "largest_accepted_messages", "smallest_refused_messages"),
        judge=_within,
        show=_show_range,
    ),
}


def _equal(assumed: Any, observed: Any) -> bool:
    return bool(assumed == observed)


def _normal(value: Any, unordered: bool) -> Any:
    if isinstance(value, list):
        value = tuple(value)
    if unordered and isinstance(value, tuple):
        return tuple(sorted(value, key=str))
    return value


def _plain(value: Any) -> Any:
    """A value as JSON has it (tuples as lists)."""
    return list(value) if isinstance(value, tuple) else value


def rows_as_dicts(rows: Sequence[Comparison]) -> list[dict[str, Any]]:
    return [row.as_dict() for row in rows]
