"""Credits for the command line: the CREDITS column of `q2api accounts list` and `q2api accounts usage`.

`list` only asks with access tokens that are still valid (a listing never refreshes a token, so
it never spends a refresh token a running gateway relies on); `usage` refreshes like the gateway
does, under the same cross-process lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from q2api.accounts.discovery import AccountDiscovery
from q2api.accounts.pool import build_account_pool
from q2api.accounts.records import Account
from q2api.accounts.store_protocol import CredentialStore
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import API_KEY_AUTH, token_type_of
from q2api.amazonq.credits import Credits, fetch_credits, iso_time
from q2api.amazonq.errors import UpstreamError
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.hosts import first_host, parse_override
from q2api.amazonq.service_api import ServiceApi, ServiceApis
from q2api.log_text import one_line
from q2api.models.table import builtin_catalogue
from q2api.server.wiring import refresh_endpoints, upstream_session
from q2api.settings import Settings

USAGE_COLUMNS = ("ID", "LABEL", "PLAN", "USED", "LIMIT", "LEFT", "RESETS AT")
_TIMEOUT = 10.0
_VALID_FOR_AT_LEAST = 30.0  # seconds left on an access token that a listing still uses


async def credits_with_current_tokens(store: CredentialStore, settings: Settings) -> dict[str, Credits]:
    """Credits of every account that holds an unexpired access token (account id → credits)."""
    now = time.time()
    usable = [
        account
        for account in await store.accounts()
        if account.access_token and (account.expires_at is None or account.expires_at - now > _VALID_FOR_AT_LEAST)
    ]
    if not usable:
        return {}
    override = parse_override(settings.endpoint)
    async with upstream_session() as session:
        proxies = AccountProxies(session)
        found: dict[str, Credits] = {}

        async def read(account: Account) -> None:
            # The host the account's chat would go to first (nothing has failed in this one-off call).
            host = first_host(account.auth_method, account.region, bool(account.profile_arn), override)
            api = ServiceApi(session, host.url, timeout=_TIMEOUT, proxies=proxies)
            with contextlib.suppress(UpstreamError):
                found[account.id] = await fetch_credits(
                    api,
                    account.access_token or "",
                    profile_arn=None if account.auth_method == API_KEY_AUTH else account.profile_arn,
                    token_type=token_type_of(account.auth_method),  # a Kiro API key says so
                    proxy_url=account.proxy_url,
                )

        try:
            await asyncio.gather(*(read(account) for account in usable))
        finally:
            await proxies.close()
        return found


async def read_usage(
    store: CredentialStore, settings: Settings, account_ids: Sequence[str]
) -> dict[str, Credits | None]:
    """Credits of the given accounts, refreshing their tokens when needed (None: could not be read)."""
    async with upstream_session() as session:
        proxies = AccountProxies(session)
        try:
            pool = await build_account_pool(store, session, endpoints=refresh_endpoints(settings), proxies=proxies)
            apis = ServiceApis(session, HostChoice(settings.endpoint), timeout=_TIMEOUT, proxies=proxies)
            discovery = AccountDiscovery(pool, apis, fallback=builtin_catalogue())
            wanted = [manager for manager in pool.managers() if manager.account_id in account_ids]
            results = await asyncio.gather(*(discovery.refresh_credits(manager) for manager in wanted))
        finally:
            await proxies.close()
        return {manager.account_id: result for manager, result in zip(wanted, results, strict=True)}


def credits_cell(credits: Credits | None) -> str:
    """`12.5/50` (used/limit), `exhausted`, or `-` when unknown."""
    if credits is None:
        return "-"
    text = f"{_number(credits.used)}/{_number(credits.limit)}"
    return f"{text} (used up)" if credits.exhausted else text


def usage_row(account_id: str, label: str, credits: Credits | None) -> tuple[str, ...]:
    account_id, label = one_line(account_id), one_line(label)  # stored text, shown on a terminal
    if credits is None:
        return (account_id, label, "unknown", "-", "-", "-", "-")
    return (
        account_id,
        label,
        credits.subscription or "-",
        _number(credits.used),
        _number(credits.limit),
        _number(credits.remaining),
        iso_time(credits.resets_at) or "-",
    )


def _number(value: float) -> str:
    return f"{value:g}"
