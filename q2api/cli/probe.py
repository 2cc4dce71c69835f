"""`q2api probe [--account LABEL] [--output FILE] [--limits [--yes]] [--compare]`: measure the real upstream.

Runs the fixed set of small requests of q2api.probe against each enabled account (or the one named),
prints a line per step and a summary table, and writes the report (docs/probe.md) — redacted, so it
can be attached to an issue as it is. `--compare` checks what the simulator assumes
(q2api.testing.assumptions) against what was seen, in the terminal and in the report.

Exit status: 0 when the report was written, 1 when nothing was sent (--limits declined, no account
to probe), 2 for a usage or settings error.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from pathlib import Path
from typing import Any

from q2api.probe.limit_budget import LIMITS_BYTES, LIMITS_CALLS
from q2api.probe.steps import DEFAULT_BUDGET
from q2api.settings import SettingsError, load_settings

EXIT_OK = 0
EXIT_NOTHING_SENT = 1
EXIT_USAGE = 2


def add_probe_parser(commands: Any) -> None:
    probe = commands.add_parser(
        "probe",
        help="measure the real Amazon Q behind each account (a few small requests) and write a redacted report",
        description=(
            "Send a fixed, documented set of small requests (docs/probe.md) to the Amazon Q behind each enabled "
            f"account — at most {DEFAULT_BUDGET} per account — and write what came back as shapes, statuses and "
            "sizes, never a token, a key, an account number, an e-mail, a prompt or a reply. Attach the file "
            "to an issue as it is."
        ),
    )
    probe.add_argument(
        "--account", metavar="LABEL", help="probe only this account (id or label); default: every enabled one"
    )
    probe.add_argument("--output", metavar="FILE", help="where the report goes (default: probe-<date>.json here)")
    probe.add_argument(
        "--limits",
        action="store_true",
        help=f"also find the request size limit and the history cap (up to {LIMITS_CALLS} more requests per "
        "account; asks first)",
    )
    probe.add_argument("--yes", action="store_true", help="with --limits: do not ask for confirmation")
    probe.add_argument(
        "--compare",
        action="store_true",
        help="compare what the simulated upstream assumes with what this upstream showed (same / different / not observed)",
    )
    probe.set_defaults(run=run_probe_command)


def run_probe_command(args: argparse.Namespace) -> int:
    # The probe is imported when it runs: every command builds this parser, `q2api serve` too.
    from q2api.probe.compare import compare, rows_as_dicts
    from q2api.probe.redaction import Redactor
    from q2api.probe.report import serialise
    from q2api.probe.runner import NoSuchAccount, ProbeOptions, run_probe
    from q2api.probe.terminal import comparison_table, summary_table

    if args.yes and not args.limits:
        print("q2api probe: --yes only goes with --limits", file=sys.stderr)
        return EXIT_USAGE
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"q2api: {exc}", file=sys.stderr)
        return EXIT_USAGE
    output = Path(args.output or f"probe-{datetime.date.today().isoformat()}.json")
    redactor = Redactor()
    labels: dict[str, str] = {}

    def confirm(accounts: int) -> bool:
        return confirm_limits(accounts, assume_yes=args.yes)

    options = ProbeOptions(account=args.account, limits=args.limits)
    try:
        report = asyncio.run(run_probe(settings, options, redactor, _progress, confirm, labels.update))
    except NoSuchAccount as exc:
        print(f"q2api probe: no account {exc.args[0]!r} (see `q2api accounts list`)", file=sys.stderr)
        return EXIT_USAGE
    if report is None:
        print("q2api probe: nothing was sent.")
        return EXIT_NOTHING_SENT
    if not report.accounts:
        print("q2api probe: no enabled account to probe (see `q2api accounts list`); nothing was sent.")
        return EXIT_NOTHING_SENT
    rows = None
    if args.compare:
        from q2api.testing.assumptions import SIMULATOR  # the CLI may read the simulator's table; the probe never does

        rows = compare(SIMULATOR.values(), report)
        report.comparison = rows_as_dicts(rows)
    output.write_bytes(serialise(report, redactor))
    print()
    print(summary_table(report, labels))
    if rows is not None:
        print()
        print(comparison_table(rows))
    print()
    print(f"The report is in {output}: it holds no token, key, account number, e-mail, prompt or reply, and may be")
    print("attached to an issue as it is (docs/troubleshooting.md says what else to attach).")
    return EXIT_OK


def confirm_limits(accounts: int, *, assume_yes: bool) -> bool:
    """Say what --limits costs, and ask (unless `assume_yes`); without a terminal to ask on, refuse."""
    megabytes = LIMITS_BYTES // (1024 * 1024)
    print(
        f"--limits sends up to {LIMITS_CALLS} more requests per account ({accounts} account(s): up to "
        f"{LIMITS_CALLS * accounts}) after the default run: bodies from 256 KiB to 16 MiB (about {megabytes} MB sent "
        "per account at most, mostly filler that is cheap in tokens) and histories of up to 1,000 short messages. "
        "Each accepted request is metered as one request of its size (the report's text step shows what a small "
        "one cost in credits)."
    )
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        print("q2api probe: add --yes to run --limits without a terminal to confirm on.", file=sys.stderr)
        return False
    answer = input("Send them? [y/N] ").strip().lower()
    return answer in ("y", "yes")


def _progress(line: str) -> None:
    print(line, flush=True)
