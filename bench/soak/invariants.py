"""The soak's verdict: what must hold once everything has run at once, each as a row of the table.

Each check takes what the run observed (the journal, the ledger as the store holds it, the logs, the
processes' holdings) and answers `Verdict(name, held, detail)`; `detail` gives the figures behind
the verdict either way, so a row that holds still shows how close it came.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from bench.soak.clients import KEY_LIMITS, REVOCATION_SECONDS
from bench.soak.journal import CLIENT_GAVE_UP, ENV_KEY, Answer, Journal
from bench.soak.resources import Holdings
from bench.soak.upstream import SLOW_REPLY_SECONDS

# The statuses each client may get: anything else is the gateway's fault (faulted requests excepted).
EXPECTED = {
    "over-rpm": {200, 429},
    "over-concurrency": {200, 429},
    "over-budget": {200, 429},
    "model-refused": {403},
}
# Seconds between a ledger row's `at` (the request's start) and its admission, and between its end and
# its credits counting against its key, at most — generous: a busy machine delays both.
ADMISSION_SLACK = 3.0
SETTLE_SLACK = 3.0
RSS_GROWTH_MB = 25.0  # from a third into the run to its end
TASKS_GROWTH = 10  # event-loop tasks, after the load drained (background loops come and go)
OTHER_DESCRIPTORS_GROWTH = 10  # files and sockets other than the pools', after the load drained
POOLED_DATABASE_CONNECTIONS = 5 + 10 + 4  # SQLAlchemy's pool and overflow, and the refresh-lock connections
SQLITE_DESCRIPTORS_PER_CONNECTION = 3  # the file, its -wal and its -shm
STORE_FAILURE = re.compile(
    r"the SQLite store|the shared store|StoreUnavailable|could not be checked|could not be counted"
    r"|not written yet|usage row|reload failed|database is locked|disk I/O error|malformed",
    re.IGNORECASE,
)
PROBLEM = re.compile(r"\b(ERROR|CRITICAL)\b|Traceback")


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    held: bool
    detail: str


def _examples(items: Iterable[Any], limit: int = 3) -> str:
    listed = list(items)
    shown = "; ".join(str(item)[:240] for item in listed[:limit])
    return shown + (f"; … {len(listed) - limit} more" if len(listed) > limit else "")


def answers_as_promised(journal: Journal) -> Verdict:
    """No 5xx (or in-stream error, or reset) the upstream did not cause; every other answer what its client asked."""
    wrong: list[Answer] = []
    checked = 0
    for answer in journal.answers:
        if answer.faulted or answer.actor == "revocation-probe":
            continue
        checked += 1
        expected = EXPECTED.get(answer.actor, {200})
        if answer.status not in expected or (answer.status == 200 and answer.error):
            wrong.append(answer)
    server_errors = sum(1 for answer in wrong if answer.status >= 500 or answer.status == CLIENT_GAVE_UP)
    faulted = [answer for answer in journal.answers if answer.faulted]
    faulted_5xx = sum(1 for answer in faulted if answer.status >= 500)
    detail = (
        f"{checked} answers checked, {len(wrong)} wrong ({server_errors} 5xx, in-stream errors or resets); "
        f"{len(faulted)} faulted requests, {faulted_5xx} of them 5xx"
    )
    if wrong:
        detail += ": " + _examples(f"{a.actor} {a.door} {a.status} {a.error}" for a in wrong)
    return Verdict("zero 5xx the upstream did not cause; answers as asked", not wrong, detail)


def no_store_failures(journal: Journal, log_lines: Sequence[str]) -> Verdict:
    failures = [line for line in log_lines if STORE_FAILURE.search(line)]
    problems = [line for line in log_lines if PROBLEM.search(line) and line not in failures]
    commands = [run for run in journal.commands if run.returncode != 0]
    polls = [poll for poll in journal.polls if poll.status != 200]
    held = not (failures or problems or commands or polls)
    detail = (
        f"{len(failures)} store-failure lines, {len(problems)} ERROR/traceback lines in the logs; "
        f"{len(journal.commands) - len(commands)}/{len(journal.commands)} commands succeeded; "
        f"{len(journal.polls) - len(polls)}/{len(journal.polls)} admin and console reads answered 200"
    )
    if not held:
        detail += ": " + _examples(
            [
                *failures,
                *problems,
                *(f"{' '.join(r.args)} → {r.returncode}: {r.stderr_tail}" for r in commands),
                *(f"{p.door} {p.status} {p.error}" for p in polls),
            ]
        )
    return Verdict("zero store failures; every command and admin read succeeded", held, detail)


def stored_responses_kept(retrieved: dict[str, int], continued: dict[str, int], journal: Journal) -> Verdict:
    missing = {rid: status for rid, status in retrieved.items() if status != 200}
    not_continued = {rid: status for rid, status in continued.items() if status != 200}
    stored = len(journal.stored)
    held = stored > 0 and not missing and not not_continued and len(retrieved) == stored
    detail = (
        f"{stored} stored, {len(retrieved) - len(missing)} retrieved from another process, "
        f"{len(continued) - len(not_continued)}/{len(continued)} continued"
    )
    if missing or not_continued:
        detail += ": " + _examples([*missing.items(), *not_continued.items()])
    return Verdict("every stored response retrievable and continuable", held, detail)


def _ledger_label(answer: Answer) -> str | None:
    # A revoked key's refusal is answered before its caller is known: the ledger has no label for it.
    if answer.key == ENV_KEY or answer.status == 401:
        return None
    return answer.key


def ledger_exact(journal: Journal, rows: Sequence[dict[str, Any]]) -> Verdict:
    expected = collections.Counter(_ledger_label(answer) for answer in journal.answers)
    found = collections.Counter(row["key_label"] for row in rows)
    labels = sorted(set(expected) | set(found), key=str)
    differences = {label: (expected[label], found[label]) for label in labels if expected[label] != found[label]}
    twice = sum(count - 1 for count in collections.Counter(row["request_id"] for row in rows).values() if count > 1)
    in_ledger = {row["request_id"] for row in rows}
    unrecorded = [answer for answer in journal.answers if answer.request_id and answer.request_id not in in_ledger]
    detail = f"{sum(found.values())} ledger rows for {sum(expected.values())} answered requests, {len(labels)} keys"
    if twice:
        detail += f"; {twice} rows repeat another row's request id"
    if unrecorded:
        detail += f"; {len(unrecorded)} answered request ids have no row: " + _examples(
            f"{a.actor} {a.status} {a.request_id}" for a in unrecorded
        )
    if differences:
        detail += "; answered vs ledger: " + _examples(
            f"{label or ENV_KEY}: {a} vs {b}" for label, (a, b) in differences.items()
        )
    held = not differences and not twice and not unrecorded
    return Verdict("ledger totals equal requests served, per key", held, detail)


def _served(rows: Sequence[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return sorted((row for row in rows if row["key_label"] == label and row["status"] < 400), key=lambda row: row["at"])


def limits_held(rows: Sequence[dict[str, Any]], slow_arrivals: Sequence[float]) -> Verdict:
    """Requests a minute and credits a day from the ledger's rows of each limited key; requests in flight from
    when the concurrency key's slow requests reached the simulated Amazon Q (`slow_arrivals`, wall clock)."""
    findings: list[str] = []
    breaches: list[str] = []
    # Requests a minute: rows certainly admitted inside one fixed minute never outnumber the limit.
    rpm = KEY_LIMITS["soak-rpm"]["rpm"]
    minutes = collections.Counter(
        math.floor(row["at"] / 60)
        for row in _served(rows, "soak-rpm")
        if math.floor(row["at"] / 60) == math.floor((row["at"] + ADMISSION_SLACK) / 60)
    )
    busiest = max(minutes.values(), default=0)
    findings.append(f"rpm {busiest}/{rpm} in the busiest minute")
    if busiest > rpm:
        breaches.append(f"{busiest} requests admitted in one minute for a limit of {rpm}")
    # Requests in flight, as the simulated Amazon Q saw them: a slow reply's stream is open from its
    # arrival for at least SLOW_REPLY_SECONDS, all of it after its admission and before its place was given back.
    limit = KEY_LIMITS["soak-concurrency"]["max_concurrent"]
    edges = [edge for arrival in slow_arrivals for edge in ((arrival, 1), (arrival + SLOW_REPLY_SECONDS, -1))]
    in_flight = peak = 0
    for _, change in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        in_flight += change
        peak = max(peak, in_flight)
    findings.append(f"in flight {peak}/{limit} at most upstream")
    if peak > limit:
        breaches.append(f"{peak} requests in flight upstream for a limit of {limit}")
    # Credits a day: no request admitted once what had certainly been counted reached the budget.
    budget = KEY_LIMITS["soak-budget"]["credits_per_day"]
    served = _served(rows, "soak-budget")
    late = 0
    for row in served:
        counted = sum(
            other["credits"] for other in served if other["at"] + other["duration_ms"] / 1000 + SETTLE_SLACK < row["at"]
        )
        if counted >= budget:
            late += 1
    spent = sum(row["credits"] for row in served)
    findings.append(f"budget {spent:.3f}/{budget:g} credits spent, {late} admitted past it")
    if late:
        breaches.append(f"{late} requests admitted after the budget of {budget:g} credits was spent")
    refused = sum(1 for row in rows if row["key_label"] in KEY_LIMITS and row["status"] == 429)
    findings.append(f"{refused} refused with 429")
    return Verdict("admitted requests never above a key's limits", not breaches, "; ".join(breaches or findings))


def revocation_everywhere(journal: Journal, workers: dict[str, list[int]]) -> Verdict:
    revoked_at = journal.revoked.get("soak-revoke")
    if revoked_at is None:
        return Verdict("a revoked key refused within 5 s on every worker", False, "the key was never revoked")
    probes = journal.answers_of("revocation-probe")
    late = [probe for probe in probes if probe.started >= revoked_at + REVOCATION_SECONDS and probe.status != 401]
    covered = {(probe.target, probe.worker) for probe in probes if probe.started >= revoked_at + REVOCATION_SECONDS}
    expected = {(target, pid) for target, pids in workers.items() for pid in pids}
    unproven = expected - covered
    delays = []
    for target, pid in sorted(expected & covered):
        refusals = [p.ended for p in probes if (p.target, p.worker) == (target, pid) and p.status == 401]
        if refusals:
            delays.append(min(refusals) - revoked_at)
    after = [probe for probe in probes if probe.started >= revoked_at + REVOCATION_SECONDS]
    statuses = collections.Counter(probe.status for probe in after)
    detail = (
        f"{len(after)} probes from 5 s after the revocation ({dict(statuses)}); "
        f"{len(expected & covered)}/{len(expected)} workers probed then, "
        f"refused after {max(delays, default=float('nan')):.1f} s at most; {len(late)} probes served late"
    )
    if late or unproven:
        detail += ": " + _examples(
            [
                *(f"{p.target} pid {p.worker}: {p.status}" for p in late),
                *(f"{t} pid {w} never probed" for t, w in unproven),
            ]
        )
    return Verdict("a revoked key refused within 5 s on every worker", not late and not unproven, detail)


def import_picked_up(
    journal: Journal, joins: Sequence[float], processes: int, first_use: float | None, interval: float
) -> Verdict:
    """The account the command line imported joins every worker's pool within the reload interval of the
    command's end (its commit came before), and serves requests. `joins`: when each worker's /metrics first
    listed it (polled every 0.2 s)."""
    name = "an imported account joins every worker within the reload interval, and serves"
    imported_at = next(iter(journal.imported.values()), None)
    if imported_at is None:
        return Verdict(name, False, "the import did not succeed")
    latest = max((join - imported_at for join in joins), default=float("nan"))
    held = len(joins) >= processes and latest <= interval and first_use is not None
    detail = (
        f"{len(joins)}/{processes} workers took it into their pool, the last {latest:.1f} s after the command ended "
        f"(interval {interval:g} s); {'served' if first_use is not None else 'never served'}"
    )
    return Verdict(name, held, detail)


def memory_flat(growth: dict[int, tuple[float, float]]) -> Verdict:
    worst = max((later - warm for warm, later in growth.values()), default=0.0)
    figures = ", ".join(f"pid {pid}: {warm:.0f} → {later:.0f} MB" for pid, (warm, later) in sorted(growth.items()))
    return Verdict(
        "RSS flat from a third into the run",
        bool(growth) and worst <= RSS_GROWTH_MB,
        f"{figures} (≤ +{RSS_GROWTH_MB:g} MB)",
    )


def nothing_leaked(
    warm: dict[int, Holdings],
    drained: dict[int, Holdings],
    *,
    sqlite: bool,
    streams_open: int,
    upstream_open: int,
    tasks: tuple[int, int],
) -> Verdict:
    problems: list[str] = []
    figures: list[str] = [f"event-loop tasks {tasks[0]} → {tasks[1]}"]
    if tasks[1] - tasks[0] > TASKS_GROWTH:
        problems.append(f"{tasks[1] - tasks[0]} more event-loop tasks than after the warm-up ({tasks[0]} → {tasks[1]})")
    database_bound = POOLED_DATABASE_CONNECTIONS * (SQLITE_DESCRIPTORS_PER_CONNECTION if sqlite else 1)
    for pid, end in sorted(drained.items()):
        start = warm.get(pid)
        grown = end.other_descriptors - start.other_descriptors if start is not None else 0
        figures.append(
            f"pid {pid}: {end.descriptors} fds ({grown:+d} besides pools), db {end.connections['database']}, "
            f"redis {end.connections['redis']}, upstream {end.connections['upstream']}"
        )
        if grown > OTHER_DESCRIPTORS_GROWTH:
            problems.append(f"pid {pid} holds {grown} more descriptors than after the warm-up")
        if end.connections["database"] > database_bound:
            problems.append(
                f"pid {pid} holds {end.connections['database']} database descriptors (pool bound {database_bound})"
            )
    if streams_open:
        problems.append(f"{streams_open} streams still open in the gateway")
    if upstream_open:
        problems.append(f"{upstream_open} upstream streams still open at the simulator")
    return Verdict(
        "no leaked tasks, streams, descriptors or database connections", not problems, "; ".join(problems or figures)
    )


def table(verdicts: Sequence[Verdict]) -> str:
    width = max(len(verdict.name) for verdict in verdicts)
    lines = [f"{'invariant'.ljust(width)}  held  figures", f"{'-' * width}  ----  -------"]
    lines += [f"{v.name.ljust(width)}  {'yes ' if v.held else 'NO  '}  {v.detail}" for v in verdicts]
    return "\n".join(lines)
