"""The hosts step: what each host the account could use answers a minimal request (docs/protocol.md#hosts).

For each host of the account's login kind and region (or of AMAZONQ_ENDPOINT), in the gateway's order,
one plain request as the gateway would send it (with the account's profile when it has one): served,
or refused with which status and error shape. A host that refuses the token ("bearer token invalid")
after the token was refreshed, or while another host took the same token, refuses the token's kind.
A host that served a request carrying a profile gets the same request once more without it: does it
need one? A host that answered a request without a profile "profileArn is required" needs one.

The first host that served is where the other generations go (as the gateway's requests would), and
its reply is the plain-text step's.
"""

from __future__ import annotations

from typing import Any

from q2api.amazonq.hosts import Host, sends_profile
from q2api.probe import bodies
from q2api.probe.account_run import AccountRun
from q2api.probe.exchange import REFUSED, SERVED, Generation
from q2api.probe.report import DONE, FAILED, SKIPPED, StepReport, host_name
from q2api.probe.steps import STEP_CALLS, ProbeStep

MAX_HOSTS = 4
MAX_CALLS = 6  # of the default budget: the rest is the other steps'


async def hosts_step(run: AccountRun) -> StepReport:
    step = ProbeStep.HOSTS
    upstream = run.upstream
    credential = upstream.credential
    sends = bool(credential.own_profile_arn) and sends_profile(credential.auth_kind)
    findings: list[dict[str, Any]] = []
    answers: list[tuple[Host, Generation]] = []
    calls = 0
    for host in run.hosts[:MAX_HOSTS]:
        if not upstream.budget.allows(STEP_CALLS[step]) or calls + STEP_CALLS[step] > MAX_CALLS:
            findings.append(
                {"host": host_name(host.url), "kind": host.kind.value, "outcome": SKIPPED, "note": "request budget"}
            )
            continue
        generation = await upstream.generate(host, bodies.plain(run.model))
        calls += generation.calls
        run.check(step, generation.error)
        answers.append((host, generation))
        if generation.outcome == SERVED and run.serving_host is None:
            run.serving_host, run.text = host, generation
        findings.append(_finding(host, generation, sent_profile=sends, refreshed=credential.refreshes > 0))
    served_tokens = any(generation.outcome == SERVED for _, generation in answers)
    for finding, (host, generation) in zip([f for f in findings if f["outcome"] != SKIPPED], answers, strict=True):
        if finding["refuses_token_kind"] is None and generation.error is not None and generation.error.bearer_invalid:
            # Refused a token another host took: its kind, not its age, is the matter.
            finding["refuses_token_kind"] = served_tokens or None
        if not (sends and generation.outcome == SERVED):
            continue
        if not upstream.budget.allows(STEP_CALLS[step]) or calls + 1 > MAX_CALLS:
            finding["without_profile"] = {"outcome": SKIPPED, "note": "request budget"}
            continue
        bare = await upstream.generate(host, bodies.plain(run.model), with_profile=False)
        calls += bare.calls
        run.check(step, bare.error)
        finding["without_profile"] = _answer(bare)
        finding["needs_profile"] = _needs_profile(bare)
    note = ", ".join(f"{finding['host']}: {_short(finding)}" for finding in findings)
    outcomes = {finding["outcome"] for finding in findings}
    # Some host answered: that is the finding, whatever it said.
    outcome = DONE if outcomes & {SERVED, REFUSED} else SKIPPED if outcomes <= {SKIPPED} else FAILED
    return StepReport(step, outcome, calls, note, {"hosts": findings})


def _finding(host: Host, generation: Generation, *, sent_profile: bool, refreshed: bool) -> dict[str, Any]:
    error = generation.error
    refuses: bool | None = None
    if generation.outcome == SERVED:
        refuses = False
    elif error is not None and error.bearer_invalid and refreshed:
        refuses = True  # refused a token refreshed a moment before
    return {
        "host": host_name(host.url),
        "kind": host.kind.value,
        "sent_profile": sent_profile,
        **_answer(generation),
        "refuses_token_kind": refuses,
        "needs_profile": _needs_profile(generation) if not sent_profile or generation.outcome != SERVED else None,
    }


def _answer(generation: Generation) -> dict[str, Any]:
    answer: dict[str, Any] = {"outcome": generation.outcome, "calls": generation.calls}
    if generation.error is not None:
        answer["status"] = generation.error.status
        answer["error"] = generation.error.as_dict()
    elif generation.outcome == SERVED:
        answer["status"] = 200
        answer["events"] = list(generation.shape.kinds) if generation.shape else []
    if generation.detail:
        answer["detail"] = generation.detail
    return answer


def _needs_profile(generation: Generation) -> bool | None:
    """Of a request sent without a profile: served (no), "profileArn is required" (yes), else unknown."""
    if generation.outcome == SERVED:
        return False
    if generation.error is not None and generation.error.needs_profile:
        return True
    return None


def _short(finding: dict[str, Any]) -> str:
    if finding["outcome"] == SERVED:
        text = "served"
    elif finding["outcome"] == REFUSED:
        text = f"refused {finding.get('status')}"
        if finding.get("refuses_token_kind"):
            text += " (the token's kind)"
    else:
        text = finding["outcome"]
    if finding.get("needs_profile"):
        text += ", needs a profile"
    return text
