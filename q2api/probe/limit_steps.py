"""`--limits`: the largest request body and the most history messages the account's host accepts
(docs/protocol.md#limits, #request-body). Opt-in: these cost more than the default run.

Payload: bodies padded with filler history (`x` runs: many bytes, few tokens) from 256 KiB, doubling
until one is refused (up to 16 MiB), then bisected between the largest accepted and the smallest
refused until they are within 5 % of each other. The refusal at the boundary is reported whole (its
reason tells a byte limit from a token limit).

History: the assumed cap (198 messages) and two more first — two calls when the assumption holds —
else doubling and bisection over even counts (user / assistant pairs) up to 1,000 messages.
"""

from __future__ import annotations

from typing import Any

from q2api.probe import bodies
from q2api.probe.account_run import AccountRun
from q2api.probe.exchange import REFUSED, SERVED, Generation
from q2api.probe.limit_budget import (
    ASSUMED_HISTORY_CAP,
    HISTORY_CEILING,
    HISTORY_MAX_CALLS,
    PAYLOAD_CEILING_BYTES,
    PAYLOAD_MAX_CALLS,
    PAYLOAD_PRECISION,
    PAYLOAD_START_BYTES,
)
from q2api.probe.report import DONE, FAILED, SKIPPED, StepReport, host_name
from q2api.probe.steps import ProbeStep


async def payload_limit_step(run: AccountRun) -> StepReport:
    step = ProbeStep.PAYLOAD_LIMIT
    if run.serving_host is None:
        return StepReport(step, SKIPPED, 0, "no host served the hosts step")
    host = run.serving_host
    upstream = run.upstream
    accepted = run.text.sent_bytes if run.text is not None and run.text.sent_bytes else 0
    refused: int | None = None
    refusal: Generation | None = None
    probes: list[dict[str, Any]] = []
    calls = 0

    async def attempt(target: int) -> Generation:
        nonlocal calls
        generation = await upstream.generate(host, bodies.padded(run.model, target))
        calls += generation.calls
        run.check(step, generation.error)
        probes.append({"bytes": generation.sent_bytes, "outcome": generation.outcome, "status": _status(generation)})
        return generation

    target = PAYLOAD_START_BYTES
    while target <= PAYLOAD_CEILING_BYTES and len(probes) < PAYLOAD_MAX_CALLS:
        generation = await attempt(target)
        if generation.outcome == SERVED:
            accepted = generation.sent_bytes or target
            target *= 2
            continue
        if generation.outcome != REFUSED:
            return _unfinished(step, calls, probes, generation)
        refused, refusal = generation.sent_bytes or target, generation
        break
    while refused is not None and refused > accepted * PAYLOAD_PRECISION and len(probes) < PAYLOAD_MAX_CALLS:
        middle = int((max(accepted, 1) * refused) ** 0.5) if accepted else refused // 2
        middle = min(max(middle, accepted + 1), refused - 1)
        generation = await attempt(middle)
        if generation.outcome == SERVED:
            accepted = generation.sent_bytes or middle
        elif generation.outcome == REFUSED:
            refused, refusal = generation.sent_bytes or middle, generation
        else:
            return _unfinished(step, calls, probes, generation)
    data: dict[str, Any] = {
        "host": host_name(host.url),
        "largest_accepted_bytes": accepted,
        "smallest_refused_bytes": refused,
        "within": round(refused / accepted, 4) if refused and accepted else None,
        "refusal": refusal.error.as_dict() if refusal is not None and refusal.error else None,
        "probes": probes,
    }
    if refused is None:
        note = f"no refusal up to {accepted:,} bytes (the ceiling)"
    else:
        error = refusal.error if refusal is not None else None
        why = f"{error.status} {error.reason or error.code or error.message}" if error else "refused"
        note = f"accepted {accepted:,} bytes, refused {refused:,} ({why})"
    return StepReport(step, DONE, calls, note, data)


async def history_cap_step(run: AccountRun) -> StepReport:
    step = ProbeStep.HISTORY_CAP
    if run.serving_host is None:
        return StepReport(step, SKIPPED, 0, "no host served the hosts step")
    host = run.serving_host
    upstream = run.upstream
    accepted = 0  # the hosts step's plain request had no history
    refused: int | None = None
    refusal: Generation | None = None
    probes: list[dict[str, Any]] = []
    calls = 0

    async def attempt(messages: int) -> Generation:
        nonlocal calls
        generation = await upstream.generate(host, bodies.with_history(run.model, messages))
        calls += generation.calls
        run.check(step, generation.error)
        probes.append({"messages": messages, "outcome": generation.outcome, "status": _status(generation)})
        return generation

    candidates = [ASSUMED_HISTORY_CAP, ASSUMED_HISTORY_CAP + 2]
    while len(probes) < HISTORY_MAX_CALLS:
        if refused is not None and refused - accepted <= 2:
            break
        if candidates:
            messages = candidates.pop(0)
        elif refused is None:
            messages = min(accepted * 2, HISTORY_CEILING)
            if messages <= accepted:
                break  # the ceiling was accepted
        else:
            messages = (accepted + refused) // 4 * 2  # an even count between the two
            if messages <= accepted:
                messages = accepted + 2
        if messages <= accepted or (refused is not None and messages >= refused):
            continue
        generation = await attempt(messages)
        if generation.outcome == SERVED:
            accepted = messages
        elif generation.outcome == REFUSED:
            refused, refusal = messages, generation
            candidates = []
        else:
            return _unfinished(step, calls, probes, generation)
    data: dict[str, Any] = {
        "host": host_name(host.url),
        "largest_accepted_messages": accepted,
        "smallest_refused_messages": refused,
        "refusal": refusal.error.as_dict() if refusal is not None and refusal.error else None,
        "probes": probes,
    }
    if refused is None:
        note = f"no refusal up to {accepted} history messages"
    else:
        error = refusal.error if refusal is not None else None
        why = f"{error.status} {error.reason or error.code or error.message}" if error else "refused"
        note = f"accepted {accepted} history messages, refused {refused} ({why})"
    return StepReport(step, DONE, calls, note, data)


def _status(generation: Generation) -> int | None:
    if generation.error is not None:
        return generation.error.status
    return 200 if generation.outcome == SERVED else None


def _unfinished(step: ProbeStep, calls: int, probes: list[dict[str, Any]], generation: Generation) -> StepReport:
    return StepReport(
        step, FAILED, calls, f"a call ended {generation.outcome}", {"probes": probes, "detail": generation.detail}
    )
