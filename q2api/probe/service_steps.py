"""The steps that read, not generate: profiles, the catalogue, credits (docs/protocol.md#profiles,
#model-catalogue, #credits). They cost no credits, so they run first; the catalogue chooses the
models the generations use."""

from __future__ import annotations

from typing import Any

from q2api.amazonq.catalogue import PAGE_SIZE, CatalogueModel, parse_models_page
from q2api.amazonq.credits import RESOURCE_TYPE, iso_time, parse_usage_limits
from q2api.amazonq.hosts import Host, first_host
from q2api.amazonq.profiles import Profile, choose_profile
from q2api.amazonq.reasoning_fields import ReasoningFields
from q2api.amazonq.service_api import GET_USAGE_LIMITS, LIST_AVAILABLE_MODELS, ORIGIN
from q2api.probe.account_run import AccountRun
from q2api.probe.exchange import SERVED, UNREACHABLE, ServiceAnswer
from q2api.probe.redaction import Redactor
from q2api.probe.report import DONE, FAILED, SKIPPED, StepReport, host_name
from q2api.probe.shapes import document_fields
from q2api.probe.steps import STEP_CALLS, ProbeStep

MAX_PROFILE_HOSTS = 2
MAX_CATALOGUE_PAGES = STEP_CALLS[ProbeStep.CATALOGUE]


async def profiles_step(run: AccountRun, profile_hosts: tuple[str, ...]) -> StepReport:
    """ListAvailableProfiles on each profile host (both API regions), as the gateway asks after an IdC refresh."""
    step = ProbeStep.PROFILES
    upstream = run.upstream
    entries: list[dict[str, Any]] = []
    listings: list[list[Profile]] = []
    calls = 0
    for url in profile_hosts[:MAX_PROFILE_HOSTS]:
        if not upstream.budget.allows(1):
            entries.append({"host": host_name(url), "outcome": SKIPPED, "note": "request budget"})
            continue
        answer = await upstream.profiles(url)
        calls += answer.calls
        run.check(step, answer.error)
        listings.append(answer.profiles)
        entries.append(
            {
                "host": host_name(url),
                "outcome": answer.outcome,
                "profiles": len(answer.profiles) if answer.outcome == SERVED else None,
                "regions": sorted({_region(profile, upstream.redactor) for profile in answer.profiles}),
                "error": answer.error.as_dict() if answer.error else None,
                "detail": answer.detail,
            }
        )
    found = [profile for answer_profiles in listings for profile in answer_profiles]
    credential = upstream.credential
    if credential.auth_kind == "idc" and not credential.own_profile_arn:
        # What the gateway's refresh would have looked up (q2api.accounts.refresh): the run goes on with it.
        chosen = choose_profile(found, credential.region)
        credential.found_profile_arn = chosen.arn if chosen else None
    listed = sum(entry["profiles"] or 0 for entry in entries)
    answered = [entry for entry in entries if entry["outcome"] == SERVED]
    note = f"{listed} profile(s) listed by {len(answered)} of {len(entries)} host(s)"
    refused = [entry for entry in entries if entry["error"]]
    if refused:
        first = refused[0]["error"]
        note += f"; refused: {first['status']} {first['message'] or first['code'] or ''}".rstrip()
    return StepReport(step, DONE if answered or refused else FAILED, calls, note, {"hosts": entries})


async def catalogue_step(run: AccountRun) -> StepReport:
    """Every page (at most three) of ListAvailableModels on the host one-off calls go to, the next host when
    that one is out of reach."""
    step = ProbeStep.CATALOGUE
    upstream = run.upstream
    calls = 0
    last: ServiceAnswer | None = None
    for host in _service_hosts(run):
        documents: list[dict[str, Any]] = []
        next_token: str | None = None
        for _ in range(MAX_CATALOGUE_PAGES):
            if not upstream.budget.allows(2):
                break
            params: dict[str, str | int] = {"origin": ORIGIN, "maxResults": PAGE_SIZE}
            if upstream.credential.profile_arn:
                params["profileArn"] = upstream.credential.profile_arn
            if next_token:
                params["nextToken"] = next_token
            last = await upstream.service(host, LIST_AVAILABLE_MODELS, params)
            calls += last.calls
            run.check(step, last.error)
            if last.document is None:
                break
            documents.append(last.document)
            _, _, next_token = parse_models_page(last.document)
            if not next_token:
                break
        if documents:
            return _catalogue_report(run, host, documents, next_token is not None, calls)
        if last is None or last.outcome != UNREACHABLE:
            break
    return _failed(step, calls, last)


def _catalogue_report(
    run: AccountRun, host: Host, documents: list[dict[str, Any]], truncated: bool, calls: int
) -> StepReport:
    redactor = run.upstream.redactor
    models: list[CatalogueModel] = []
    default_model = None
    entries: list[dict[str, Any]] = []
    for document in documents:
        page, page_default, _ = parse_models_page(document)
        models.extend(page)
        default_model = default_model or page_default
        entries.extend(entry for entry in document.get("models") or () if isinstance(entry, dict))
    run.answered_host = host
    run.catalogue = list({model.model_id.lower(): model for model in models}.values())
    for entry in entries:
        rate = entry.get("rateMultiplier")
        if isinstance(entry.get("modelId"), str) and isinstance(rate, int | float) and not isinstance(rate, bool):
            run.rates[entry["modelId"]] = float(rate)
    listed = {model.model_id for model in run.catalogue}
    if default_model in listed:
        run.model = default_model
    elif run.model not in listed and run.catalogue:
        run.model = run.catalogue[0].model_id
    cheapest = run.cheapest(run.catalogue)
    if cheapest is not None:
        run.model = cheapest.model_id
    data = {
        "host": host_name(host.url),
        "flavour": run.upstream.flavour(host),
        "pages": len(documents),
        "truncated": truncated,
        "default_model": redactor.name(default_model) if default_model else None,
        "probe_model": redactor.name(run.model),
        "answer_fields": list(document_fields({k: v for k, v in documents[0].items() if k != "models"}, redactor)),
        "entry_fields": list(redactor.names(key for entry in entries for key in entry)),
        "models": [_model_entry(model, run.rates.get(model.model_id), redactor) for model in run.catalogue],
    }
    native = sum(1 for model in run.catalogue if model.reasoning is not None and model.reasoning.native)
    cached = sum(1 for model in run.catalogue if model.prompt_cache)
    note = f"{len(run.catalogue)} model(s), {native} reasoning natively, {cached} taking cache points"
    return StepReport(ProbeStep.CATALOGUE, DONE, calls, note, data)


def _model_entry(model: CatalogueModel, rate: float | None, redactor: Redactor) -> dict[str, Any]:
    return {
        "id": redactor.name(model.model_id),
        "context_window": model.max_input_tokens,
        "max_output_tokens": model.max_output_tokens,
        "input_types": sorted(redactor.names(model.input_types)),
        "prompt_cache": model.prompt_cache,
        "rate_multiplier": rate,
        "native_reasoning": bool(model.reasoning and model.reasoning.native),
        "reasoning_schema": list(reasoning_summary(model.reasoning, redactor)) if model.reasoning else None,
    }


def reasoning_summary(fields: ReasoningFields, redactor: Redactor) -> tuple[str, ...]:
    """A model's reasoning schema in one line per property: `path=a|b` (enum) or `path=low..high` (range)."""
    lines = []
    if fields.thinking_types:
        lines.append("thinking.type=" + "|".join(redactor.name(kind) for kind in fields.thinking_types))
    if fields.displays:
        lines.append("thinking.display=" + "|".join(redactor.name(kind) for kind in fields.displays))
    if fields.effort_field is not None and fields.efforts:
        lines.append(f"{fields.effort_field.value}.effort=" + "|".join(redactor.name(kind) for kind in fields.efforts))
    if fields.max_tokens_range is not None:
        low, high = fields.max_tokens_range
        lines.append(f"max_tokens={low}..{high}")
    return tuple(sorted(lines))


async def credits_step(run: AccountRun, host: Host | None) -> StepReport:
    """getUsageLimits, where the catalogue answered (the host one-off calls go to, else the next)."""
    step = ProbeStep.CREDITS
    upstream = run.upstream
    if not upstream.budget.allows(2):
        return StepReport(step, SKIPPED, 0, "request budget")
    params: dict[str, str | int] = {"origin": ORIGIN, "resourceType": RESOURCE_TYPE}
    if upstream.credential.profile_arn:
        params["profileArn"] = upstream.credential.profile_arn
    calls = 0
    answer: ServiceAnswer | None = None
    candidates = [host] if host is not None else list(_service_hosts(run))
    for candidate in candidates:
        answer = await upstream.service(candidate, GET_USAGE_LIMITS, params)
        calls += answer.calls
        run.check(step, answer.error)
        if answer.document is not None:
            return _credits_report(run, candidate, answer.document, calls)
        if answer.outcome != UNREACHABLE or not upstream.budget.allows(2):
            break
    return _failed(step, calls, answer)


def _credits_report(run: AccountRun, host: Host, document: dict[str, Any], calls: int) -> StepReport:
    redactor = run.upstream.redactor
    credits = parse_usage_limits(document)
    data = {
        "host": host_name(host.url),
        "fields": list(redactor.names(document)),
        "all_fields": list(document_fields(document, redactor)),
        "subscription": redactor.message(credits.subscription),
        "used": credits.used,
        "limit": credits.limit,
        "resets_at": iso_time(credits.resets_at),
    }
    note = f"{credits.used:g} of {credits.limit:g} credits used ({redactor.message(credits.subscription) or 'no plan named'})"
    return StepReport(ProbeStep.CREDITS, DONE, calls, note, data)


def _service_hosts(run: AccountRun) -> tuple[Host, ...]:
    """Where one-off calls go first (as the gateway's: q2api.amazonq.hosts.first_host), then the account's
    next host (one more at most)."""
    credential = run.upstream.credential
    first = first_host(credential.auth_kind, credential.region, bool(credential.own_profile_arn), run.hosts)
    others = tuple(host for host in run.hosts if host != first)
    return (first, *others[:1])


def _failed(step: ProbeStep, calls: int, answer: ServiceAnswer | None) -> StepReport:
    if answer is None:
        return StepReport(step, SKIPPED, calls, "request budget")
    data: dict[str, Any] = {"outcome": answer.outcome, "error": answer.error.as_dict() if answer.error else None}
    if answer.detail:
        data["detail"] = answer.detail
    error = answer.error
    note = f"{answer.outcome}: {error.status} {error.message or error.code or ''}".rstrip() if error else answer.outcome
    return StepReport(step, FAILED, calls, note, data)


def _region(profile: Profile, redactor: Redactor) -> str:
    return redactor.name(profile.region) if profile.region else "unknown"
