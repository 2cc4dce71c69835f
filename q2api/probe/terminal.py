"""What `q2api probe` prints: the summary table of each account's steps, and the comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from q2api.log_text import one_line
from q2api.probe.compare import Comparison
from q2api.probe.report import ProbeReport

_NOTE_WIDTH = 72


def summary_table(report: ProbeReport, labels: Mapping[str, str]) -> str:
    """One row per account and step: ACCOUNT, STEP, OUTCOME, CALLS, NOTE."""
    rows: list[tuple[str, ...]] = [("ACCOUNT", "STEP", "OUTCOME", "CALLS", "NOTE")]
    for account in report.accounts:
        name = one_line(labels.get(account.account, account.account))
        if not account.steps and account.stopped:
            rows.append((name, "-", f"not probed: {account.stopped['why']}", "0", ""))
        for step in account.steps:
            rows.append((name, step.step.value, step.outcome, str(step.calls), _cut(one_line(step.note or ""))))
        rows.append(
            (
                name,
                "(all)",
                f"stopped: {account.stopped['why']}" if account.stopped else "done",
                str(account.calls),
                f"budget {account.budget}",
            )
        )
    return _table(rows)


def comparison_table(rows: Sequence[Comparison]) -> str:
    """One row per fact; then each fact found different, with both values whole."""
    table: list[tuple[str, ...]] = [("FACT", "VERDICT", "ASSUMED", "OBSERVED")]
    for row in rows:
        observed = "-" if row.verdict == "not_observed" else _value(row.observed)
        table.append((row.key, row.verdict, _cut(_value(row.assumed), 40), _cut(observed, 40)))
    lines = [_table(table)]
    for row in rows:
        if row.verdict == "different":
            lines.append(f"\n{row.key} (step {row.step}; {row.source}):")
            lines.append(f"  the simulator assumes: {_value(row.assumed)}")
            lines.append(f"  this upstream showed:  {_value(row.observed)}")
    return "\n".join(lines)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return ", ".join(_value(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key}={item}" for key, item in value.items())
    return one_line(str(value))


def _cut(text: str, width: int = _NOTE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
