"""The soak's invariants fail when what they guard breaks (bench/soak/invariants.py), on made-up runs.

The soak itself (test_soak_everything.py) only shows that they hold; these show each one can fail.
"""

from __future__ import annotations

import pytest

from bench.soak import invariants
from bench.soak.journal import ENV_KEY, Answer, CommandRun, Journal
from bench.soak.resources import Holdings

T0 = 1_800_000_000.0  # the start of a minute


def answer(actor: str = "claude-json", key: str = "soak-json", status: int = 200, **fields: object) -> Answer:
    values: dict[str, object] = {"door": "messages", "target": "http://gw", "started": T0, "ended": T0 + 0.1}
    values.update(fields)
    return Answer(actor, key, status=status, **values)  # type: ignore[arg-type]


def journal_of(*answers: Answer) -> Journal:
    journal = Journal()
    journal.answers.extend(answers)
    return journal


def ledger_row(
    label: str | None,
    at: float,
    *,
    status: int = 200,
    duration_ms: float = 100.0,
    credits: float = 0.01,
    request_id: str | None = None,
) -> dict[str, object]:
    return {
        "request_id": request_id or f"req_{at}_{label}",
        "key_label": label,
        "status": status,
        "at": at,
        "duration_ms": duration_ms,
        "credits": credits,
        "door": "/v1/messages",
    }


@pytest.mark.parametrize(
    ("given", "held"),
    [
        (answer(status=500), False),  # a 5xx nobody asked for
        (answer(status=0), False),  # a reset
        (answer(status=500, faulted=True), True),  # the upstream was told to fail it
        (answer(status=200, error="expected a tool call"), False),  # a 200 that is not what was asked
        (answer("model-refused", "soak-model", status=403), True),
        (answer("model-refused", "soak-model", status=200), False),  # served a model the key may not use
        (answer("over-rpm", "soak-rpm", status=429), True),
    ],
)
def test_answers_are_judged_by_what_their_client_asked(given: Answer, held: bool) -> None:
    assert invariants.answers_as_promised(journal_of(given)).held is held


def test_a_store_failure_a_failed_command_or_an_admin_error_breaks_the_store_invariant() -> None:
    quiet = journal_of()
    assert invariants.no_store_failures(quiet, ["INFO POST /v1/messages status=200"]).held
    failing_line = "WARNING | the SQLite store /d/q2api.sqlite3 failed: OperationalError: disk I/O error"
    assert not invariants.no_store_failures(quiet, [failing_line]).held
    failed_command = journal_of()
    failed_command.commands.append(CommandRun(("usage",), 1, "q2api usage: the store failed", T0, T0 + 1))
    assert not invariants.no_store_failures(failed_command, []).held
    failed_poll = journal_of()
    failed_poll.polls.append(answer("admin-poll", "(admin)", status=503, door="/admin/api/usage"))
    assert not invariants.no_store_failures(failed_poll, []).held


def test_the_ledger_must_hold_each_answered_request_once() -> None:
    answers = [
        answer(request_id="req_1"),
        answer(key=ENV_KEY, request_id="req_2"),
        answer("revocation-probe", "soak-revoke", 401, request_id="req_3"),
    ]
    exact = [
        ledger_row("soak-json", T0, request_id="req_1"),
        ledger_row(None, T0, request_id="req_2"),
        ledger_row(None, T0, request_id="req_3"),
    ]
    assert invariants.ledger_exact(journal_of(*answers), exact).held
    assert not invariants.ledger_exact(journal_of(*answers), exact[:2]).held  # a row lost
    assert not invariants.ledger_exact(journal_of(*answers), [*exact, exact[0]]).held  # a row written twice
    swapped = [exact[0], exact[1], ledger_row(None, T0, request_id="req_9")]  # the counts agree, the ids do not
    assert not invariants.ledger_exact(journal_of(*answers), swapped).held


def test_a_key_admitted_past_its_rate_its_concurrency_or_its_budget_breaks_the_limits_invariant() -> None:
    within = [ledger_row("soak-rpm", T0 + second) for second in range(40)]
    assert invariants.limits_held(within, []).held
    assert not invariants.limits_held([*within, ledger_row("soak-rpm", T0 + 50)], []).held
    # A request that started just before the minute may have been admitted in the next one: not a breach.
    assert invariants.limits_held([*within, ledger_row("soak-rpm", T0 - 0.1)], []).held
    # Three of the concurrency key's slow requests open upstream at once, for a limit of two.
    assert not invariants.limits_held([], [T0, T0 + 0.1, T0 + 0.2]).held
    assert invariants.limits_held([], [T0, T0 + 0.1, T0 + 5]).held
    spent = [ledger_row("soak-budget", T0 + 10 * n, credits=0.1, request_id=f"b{n}") for n in range(3)]
    assert invariants.limits_held(spent, []).held  # 0.2 counted before the third: still under 0.25
    assert not invariants.limits_held([*spent, ledger_row("soak-budget", T0 + 40, credits=0.1)], []).held


def test_a_revoked_key_must_be_refused_on_every_worker() -> None:
    workers = {"http://gw": [11, 12]}
    revoked = T0 + 10

    def probe(at: float, status: int, worker: int) -> Answer:
        return answer("revocation-probe", "soak-revoke", status, started=at, ended=at + 0.01, worker=worker)

    refused = journal_of(probe(T0, 200, 11), probe(revoked + 6, 401, 11), probe(revoked + 6, 401, 12))
    refused.revoked["soak-revoke"] = revoked
    assert invariants.revocation_everywhere(refused, workers).held
    served_late = journal_of(probe(revoked + 6, 401, 11), probe(revoked + 7, 200, 12))
    served_late.revoked["soak-revoke"] = revoked
    assert not invariants.revocation_everywhere(served_late, workers).held
    one_worker = journal_of(probe(revoked + 6, 401, 11))
    one_worker.revoked["soak-revoke"] = revoked
    assert not invariants.revocation_everywhere(one_worker, workers).held  # worker 12 unproven


def test_growing_memory_or_descriptors_and_open_streams_break_their_invariants() -> None:
    assert invariants.memory_flat({1: (80.0, 90.0)}).held
    assert not invariants.memory_flat({1: (80.0, 180.0)}).held
    idle = Holdings(80.0, 40, {"database": 6, "redis": 0, "upstream": 4})
    assert invariants.nothing_leaked(
        {1: idle}, {1: idle}, sqlite=False, streams_open=0, upstream_open=0, tasks=(20, 22)
    ).held
    leaky = Holdings(80.0, 90, {"database": 6, "redis": 0, "upstream": 4})
    assert not invariants.nothing_leaked(
        {1: idle}, {1: leaky}, sqlite=False, streams_open=0, upstream_open=0, tasks=(20, 22)
    ).held
    pooled_too_many = Holdings(80.0, 70, {"database": 30, "redis": 0, "upstream": 4})
    assert not invariants.nothing_leaked(
        {1: idle}, {1: pooled_too_many}, sqlite=False, streams_open=0, upstream_open=0, tasks=(20, 22)
    ).held
    assert not invariants.nothing_leaked(
        {1: idle}, {1: idle}, sqlite=False, streams_open=1, upstream_open=0, tasks=(20, 22)
    ).held
    assert not invariants.nothing_leaked(
        {1: idle}, {1: idle}, sqlite=False, streams_open=0, upstream_open=0, tasks=(20, 90)
    ).held


def test_an_imported_account_must_join_every_worker_in_time_and_serve() -> None:
    journal = journal_of()
    journal.imported["soak-imported"] = T0
    assert invariants.import_picked_up(journal, [T0 - 0.2, T0 + 1.5], 2, T0 + 2, interval=3.0).held
    assert not invariants.import_picked_up(journal, [T0 + 1.5], 2, T0 + 2, interval=3.0).held  # one worker never
    assert not invariants.import_picked_up(journal, [T0, T0 + 9], 2, T0 + 2, interval=3.0).held  # one too late
    assert not invariants.import_picked_up(journal, [T0, T0 + 1], 2, None, interval=3.0).held  # never served
    assert not invariants.import_picked_up(journal_of(), [T0], 1, T0, interval=3.0).held  # the import failed
