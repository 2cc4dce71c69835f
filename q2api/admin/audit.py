"""One INFO line per admin action: who did what to which account (ids and labels, never a secret)."""

from __future__ import annotations

from loguru import logger

ACTOR = "admin"  # the one identity the admin key stands for


def audit(action: str, *, account_id: str | None = None, label: str | None = None, outcome: str = "ok") -> None:
    logger.bind(actor=ACTOR, action=action, account_id=account_id or "-", label=label or "-", outcome=outcome).info(
        f"admin {action}"
    )
