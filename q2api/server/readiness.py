"""Where am I, and can I serve: the store and accounts logged at start-up, and `/readyz`'s answer."""

from __future__ import annotations

from loguru import logger

from q2api.accounts.pool import AccountPool
from q2api.accounts.reload import AccountReloader
from q2api.accounts.store_protocol import AccountStore
from q2api.log_text import one_line


async def log_store_contents(store: AccountStore) -> None:
    """One line naming the store (absolute path or masked URL), one per account in it (labels and states, no secret)."""
    accounts = await store.accounts()
    logger.info(f"account store: {one_line(store.location)} ({len(accounts)} account(s))")
    for account in accounts:
        state = account.status.value if account.enabled else "disabled"
        detail = f" ({one_line(account.status_detail)})" if account.status_detail else ""
        # Labels come from whoever added the account (an import names it after a file's contents):
        # escaped, so none can forge a line or drive the terminal.
        logger.info(
            f"account {one_line(account.id)} ({one_line(account.label)}, {account.auth_method}): {state}{detail}"
        )


NO_ACCOUNT = "no Amazon Q account is configured"
# What a newcomer does about NO_ACCOUNT (start-up says it once, with the reason).
NO_ACCOUNT_REMEDY = (
    "add one with `q2api accounts import` (the logins Kiro IDE, kiro-cli or the Amazon Q CLI hold), "
    "`q2api login` (Builder ID) or AMAZONQ_REFRESH_TOKEN; a running gateway serves it within seconds"
)


async def readiness(store: AccountStore, pool: AccountPool, reloader: AccountReloader | None = None) -> str | None:
    """None when a request would be served now, else the reason it would not.

    The one definition of "ready": `/readyz` answers it, and start-up logs it.
    """
    if reloader is not None and reloader.failure is not None:
        # Without its reloader this worker serves the accounts of the past (a disabled one keeps serving).
        return f"the accounts cannot follow the store: {reloader.failure}"
    reason = pool.unready_reason()
    if reason is None or len(pool):
        return reason
    stored = await store.accounts()
    if stored:
        return f"every account is disabled ({len(stored)} in the store)"
    return NO_ACCOUNT


async def log_readiness(store: AccountStore, pool: AccountPool, endpoint: str) -> None:
    """Start-up's last line: ready (INFO) or not yet, and why (WARNING) — as `/readyz` will answer."""
    reason = await readiness(store, pool)
    if reason is None:
        # `endpoint` is AMAZONQ_ENDPOINT: empty when each account's hosts follow from its login kind and region.
        hosts = endpoint or "derived per account"
        logger.info(f"q2api ready: {len(pool)} Amazon Q account(s) serving, hosts {hosts}")
    else:
        remedy = f"; {NO_ACCOUNT_REMEDY}" if reason == NO_ACCOUNT else ""
        logger.warning(
            f"q2api is running but not ready: {reason} (/readyz answers 503 until an account can serve){remedy}"
        )
