"""One tiny generation per capability the catalogue claims (docs/protocol.md#event-types and after), on the
first host that served the hosts step: plain text, a tool call and its result, native thinking and its
signature sent back, a cache point twice, and web search with and without results.

Each records shapes only — event kinds in order, field names, usage figures — never what was said.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from q2api.amazonq.catalogue import CatalogueModel
from q2api.probe import bodies
from q2api.probe.account_run import AccountRun
from q2api.probe.exchange import SERVED, Generation, SearchAnswer
from q2api.probe.report import DONE, FAILED, NOT_CLAIMED, SKIPPED, StepReport, host_name
from q2api.probe.shapes import CONTENT_EVENTS
from q2api.probe.steps import STEP_CALLS, ProbeStep


def text_step(run: AccountRun) -> StepReport:
    """The plain reply the hosts step already got from the first host that served: no call of its own."""
    step = ProbeStep.TEXT
    generation, host = run.text, run.serving_host
    if generation is None or host is None or generation.shape is None:
        return StepReport(step, SKIPPED, 0, "no host served")
    shape = generation.shape
    data = {"host": host_name(host.url), "model": run.upstream.redactor.name(run.model), **shape.as_dict()}
    data["closing_events"] = list(shape.closing_kinds)
    note = " → ".join(shape.kinds)
    return StepReport(step, DONE, 0, note, data)


async def tool_call_step(run: AccountRun) -> StepReport:
    step = ProbeStep.TOOL_CALL
    if (skipped := _cannot_run(run, step)) is not None:
        return skipped
    assert run.serving_host is not None
    upstream = run.upstream
    first = await upstream.generate(run.serving_host, bodies.tool_call(run.model))
    run.check(step, first.error)
    data: dict[str, Any] = {"model": upstream.redactor.name(run.model), "first": _generation(first)}
    if first.outcome != SERVED or first.content is None:
        return StepReport(step, FAILED, first.calls, f"first turn: {_outcome(first)}", data)
    calls = list(first.content.tool_calls.values())
    if not calls:
        return StepReport(step, DONE, first.calls, "the model called no tool", data)
    call = calls[0]
    tool_input = _object(call.input_text)
    data["call"] = {
        "calls": len(calls),
        "named_tool": call.name == bodies.TOOL_NAME,
        "input_in_first_event": call.input_in_first_event,
        "stop_event": call.stopped,
        "input_is_object": tool_input is not None,
        "event_fields": [list(fields) for fields in first.shape.fields_of("toolUseEvent")] if first.shape else [],
    }
    second = await upstream.generate(
        run.serving_host, bodies.tool_result(run.model, call.tool_use_id, call.name, tool_input or {})
    )
    run.check(step, second.error)
    data["second"] = _generation(second)
    note = f"called {'the' if call.name == bodies.TOOL_NAME else 'another'} tool; result sent back: {_outcome(second)}"
    return StepReport(step, DONE if second.outcome == SERVED else FAILED, first.calls + second.calls, note, data)


async def thinking_step(run: AccountRun) -> StepReport:
    step = ProbeStep.THINKING
    native = [model for model in run.catalogue if model.reasoning is not None and model.reasoning.native]
    model = run.cheapest(native)
    if model is None or model.reasoning is None:
        return StepReport(step, NOT_CLAIMED, 0, "no model of the catalogue reasons natively")
    if (skipped := _cannot_run(run, step)) is not None:
        return skipped
    assert run.serving_host is not None
    upstream = run.upstream
    fields = model.reasoning
    first = await upstream.generate(run.serving_host, bodies.thinking(model.model_id, fields))
    run.check(step, first.error)
    data: dict[str, Any] = {
        "model": upstream.redactor.name(model.model_id),
        "fields_sent": sorted(_paths(bodies.reasoning_fields(fields))),
        "first": _generation(first),
    }
    content = first.content
    if first.outcome != SERVED or content is None:
        return StepReport(step, FAILED, first.calls, f"first turn: {_outcome(first)}", data)
    data["reasoning"] = {
        "text_chars": len(content.reasoning),
        "signature_frames": content.signature_frames,
        "signature_chars": len(content.signature),
        "redacted": bool(content.redacted_reasoning),
    }
    if not (content.signature or content.redacted_reasoning):
        return StepReport(step, DONE, first.calls, "no signed or redacted reasoning came back", data)
    second = await upstream.generate(
        run.serving_host,
        bodies.thinking_follow_up(
            model.model_id, fields, content.text, content.reasoning, content.signature, content.redacted_reasoning
        ),
    )
    run.check(step, second.error)
    data["second"] = _generation(second)
    note = f"signature in {content.signature_frames} frame(s); sent back: {_outcome(second)}"
    return StepReport(step, DONE if second.outcome == SERVED else FAILED, first.calls + second.calls, note, data)


async def cache_step(run: AccountRun) -> StepReport:
    step = ProbeStep.CACHE
    cached = [model for model in run.catalogue if model.prompt_cache]
    model = _prefer(run, cached)
    if model is None:
        return StepReport(step, NOT_CLAIMED, 0, "no model of the catalogue takes cache points")
    if (skipped := _cannot_run(run, step)) is not None:
        return skipped
    assert run.serving_host is not None
    upstream = run.upstream
    body = bodies.cached(model.model_id, str(uuid.uuid4()))
    first = await upstream.generate(run.serving_host, body)
    run.check(step, first.error)
    data: dict[str, Any] = {"model": upstream.redactor.name(model.model_id), "first": _generation(first)}
    if first.outcome != SERVED:
        return StepReport(step, FAILED, first.calls, f"first call: {_outcome(first)}", data)
    second = await upstream.generate(run.serving_host, body)
    run.check(step, second.error)
    data["second"] = _generation(second)
    first_usage = first.shape.token_usage if first.shape else {}
    second_usage = second.shape.token_usage if second.shape else {}
    data["write_reported"] = "cacheWriteInputTokens" in first_usage
    data["read_reported"] = "cacheReadInputTokens" in second_usage
    data["read_on_second_call"] = second_usage.get("cacheReadInputTokens", 0) > 0
    note = (
        f"first call wrote {first_usage.get('cacheWriteInputTokens', 'nothing reported')}, "
        f"second read {second_usage.get('cacheReadInputTokens', 'nothing reported')}"
    )
    return StepReport(step, DONE if second.outcome == SERVED else FAILED, first.calls + second.calls, note, data)


async def web_search_step(run: AccountRun) -> StepReport:
    step = ProbeStep.WEB_SEARCH
    if (skipped := _cannot_run(run, step)) is not None:
        return skipped
    assert run.serving_host is not None
    upstream = run.upstream
    nothing_query = bodies.nothing_query()
    upstream.redactor.add_text(bodies.SEARCH_QUERY)
    upstream.redactor.add_secret(nothing_query)
    found = await upstream.search(run.serving_host, bodies.SEARCH_QUERY)
    nothing = await upstream.search(run.serving_host, nothing_query)
    for answer in (found, nothing):
        run.check(step, answer.shape.error if answer.shape else None)
    data = {
        "host": host_name(run.serving_host.url),
        "found": _search(found),
        "nothing": _search(nothing),
    }
    note = f"a query with results: {_search_note(found)}; one meant to find nothing: {_search_note(nothing)}"
    outcome = DONE if SERVED in (found.outcome, nothing.outcome) else FAILED
    return StepReport(step, outcome, found.calls + nothing.calls, note, data)


def _cannot_run(run: AccountRun, step: ProbeStep) -> StepReport | None:
    if run.serving_host is None:
        return StepReport(step, SKIPPED, 0, "no host served the hosts step")
    if not run.upstream.budget.allows(STEP_CALLS[step]):
        return StepReport(step, SKIPPED, 0, "request budget")
    return None


def _prefer(run: AccountRun, models: list[CatalogueModel]) -> CatalogueModel | None:
    """The run's model when it is among `models`, else the cheapest of them."""
    return next((model for model in models if model.model_id == run.model), None) or run.cheapest(models)


def _generation(generation: Generation) -> dict[str, Any]:
    data: dict[str, Any] = {"outcome": generation.outcome, "calls": generation.calls}
    if generation.error is not None:
        data["error"] = generation.error.as_dict()
    if generation.shape is not None:
        data.update(generation.shape.as_dict())
        data["content_events"] = [kind for kind in generation.shape.kinds if kind in CONTENT_EVENTS]
    if generation.detail:
        data["detail"] = generation.detail
    return data


def _outcome(generation: Generation) -> str:
    if generation.error is not None:
        error = generation.error
        return f"{generation.outcome} {error.status} {error.reason or error.code or ''}".rstrip()
    return generation.outcome


def _search(answer: SearchAnswer) -> dict[str, Any]:
    data: dict[str, Any] = {"outcome": answer.outcome, "calls": answer.calls}
    if answer.shape is not None:
        data.update(answer.shape.as_dict())
    if answer.detail:
        data["detail"] = answer.detail
    return data


def _search_note(answer: SearchAnswer) -> str:
    if answer.shape is None:
        return answer.outcome
    if answer.shape.results is not None and answer.shape.answer in ("results", "empty_results", "inner_error"):
        return f"{answer.shape.answer} ({answer.shape.results})"
    return answer.shape.answer


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _paths(document: dict[str, Any], prefix: str = "") -> set[str]:
    paths = set()
    for key, value in document.items():
        if isinstance(value, dict):
            paths |= _paths(value, f"{prefix}{key}.")
        else:
            paths.add(f"{prefix}{key}")
    return paths
