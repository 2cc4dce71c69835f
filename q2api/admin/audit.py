"""One line per admin action: who did what to which account (ids and labels, never a secret).

A change (add, enable, refresh, create a key, remove a capture…) is INFO: the log an operator keeps.
A read that changes nothing (the console polls its lists every few seconds) is DEBUG, so that an
open console does not fill the INFO log with `admin list accounts` lines.
"""

from __future__ import annotations

from loguru import logger

ACTOR = "admin"  # the one identity the admin key stands for


def audit(
    action: str,
    *,
    account_id: str | None = None,
    label: str | None = None,
    outcome: str = "ok",
    read_only: bool = False,
) -> None:
    """`read_only`: the action read and changed nothing (DEBUG); otherwise it is a change (INFO)."""
    logger.bind(actor=ACTOR, action=action, account_id=account_id or "-", label=label or "-", outcome=outcome).log(
        "DEBUG" if read_only else "INFO", f"admin {action}"
    )
