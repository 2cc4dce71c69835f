"""`q2api accounts list | add | remove | enable | disable | import | usage`: the operator's view of the account store.

Secrets go in, never out: the listing is built from `AccountView`, which has
no token or client secret, and secrets are read from environment variables or
a hidden prompt rather than echoed anywhere. Every command names the store it
uses (on stderr, so stdout stays scriptable), and a running gateway follows
every change within seconds.

Each command is a coroutine run on an event loop of its own (`asyncio.run` in
`run_accounts_command`): it opens the stores it needs and closes them before
the loop ends, since a shared store's connections belong to that loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import getpass
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any

from q2api.accounts.device_login import is_aws_region
from q2api.accounts.logins import account_id_for_label
from q2api.accounts.onboarding import NewAccount, store_new_account, verify_new_account
from q2api.accounts.opening import opened_account_store
from q2api.accounts.records import ENV_ACCOUNT_ID, AccountStats, AccountView
from q2api.accounts.refresh import RefreshedToken
from q2api.accounts.store_protocol import AccountStore
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import API_KEY_AUTH
from q2api.amazonq.credits import Credits
from q2api.amazonq.errors import RefreshRejected, RefreshUnavailable
from q2api.cli.accounts_import import run_import
from q2api.cli.credits import USAGE_COLUMNS, credits_cell, credits_with_current_tokens, read_usage, usage_row
from q2api.cli.store_copy import copy_accounts
from q2api.log_text import one_line
from q2api.server.wiring import api_key_check_urls, refresh_endpoints, upstream_session
from q2api.settings import Settings, SettingsError, load_settings
from q2api.settings.command_inputs import NEW_API_KEY, NEW_CLIENT_SECRET, NEW_REFRESH_TOKEN
from q2api.store.errors import STORE_ERRORS

# Environment variables that carry the secrets of `accounts add` (argv is visible in `ps`).
NEW_REFRESH_TOKEN_VARIABLE = NEW_REFRESH_TOKEN.name
NEW_CLIENT_SECRET_VARIABLE = NEW_CLIENT_SECRET.name
NEW_API_KEY_VARIABLE = NEW_API_KEY.name
SECRET_INPUT_VARIABLES = (NEW_REFRESH_TOKEN_VARIABLE, NEW_CLIENT_SECRET_VARIABLE, NEW_API_KEY_VARIABLE)

_NOT_A_TIME = "invalid"
EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_REFUSED = 1  # the token service refused (or could not check) the credentials
EXIT_USAGE = 2
EXIT_STORE_ERROR = 1
EXIT_INTERRUPTED = 130

TABLE_COLUMNS = (
    "ID",
    "LABEL",
    "AUTH",
    "STATUS",
    "REQUESTS",
    "CREDITS",
    "REGION",
    "PROFILE",
    "PROXY",
    "TOKEN EXPIRES",
    "REFRESHED AT",
)


@contextlib.asynccontextmanager
async def opened_store(settings: Settings) -> AsyncIterator[AccountStore]:
    """The store the settings name, announced on stderr: a command run elsewhere must not silently use another."""
    async with opened_account_store(settings.database_url, settings.data_dir, settings.secret_key) as store:
        print(f"store: {store.location}", file=sys.stderr)
        yield store


class _UsageError(Exception):
    """The command cannot run as given; the message says what to change."""


def run_accounts_command(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"q2api: {exc}", file=sys.stderr)
        return EXIT_USAGE
    commands: dict[str, Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]] = {
        "list": _list,
        "add": _add,
        "remove": _remove,
        "import": run_import,
        "enable": _enable,
        "disable": _disable,
        "usage": _usage,
        "copy": copy_accounts,
    }
    try:
        return asyncio.run(commands[args.accounts_command](args, settings))
    except (_UsageError, ValueError) as exc:
        print(f"q2api accounts {args.accounts_command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"\nq2api accounts {args.accounts_command}: cancelled, nothing changed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except STORE_ERRORS as exc:
        print(
            f"q2api accounts {args.accounts_command}: cannot use the store: {exc}",
            file=sys.stderr,
        )
        return EXIT_STORE_ERROR


# -- list ----------------------------------------------------------------------


async def _list(args: argparse.Namespace, settings: Settings) -> int:
    async with opened_store(settings) as store:
        views = await store.list_views()
        if views:
            stats = await store.read_stats()
            print(format_table(views, stats=stats, credits=await credits_with_current_tokens(store, settings)))
        else:
            print(f"No accounts in {store.location}. Add one with `q2api accounts add --label NAME`.")
    if settings.has_env_account and not any(view.id == ENV_ACCOUNT_ID for view in views):
        print(f"AMAZONQ_* variables configure an account: `q2api serve` adds it as {ENV_ACCOUNT_ID!r} at start-up.")
    return EXIT_OK


def format_table(
    views: Sequence[AccountView],
    now: float | None = None,
    stats: Mapping[str, AccountStats] | None = None,
    credits: Mapping[str, Credits] | None = None,
) -> str:
    """The listing as aligned columns; built only from views, counts and credits (used/limit, `-` when
    unknown), which hold no secret."""
    now = time.time() if now is None else now
    rows = [TABLE_COLUMNS] + [
        (
            one_line(view.id),
            one_line(view.label),
            view.auth_method,
            one_line(_status(view)),
            _requests((stats or {}).get(view.id)),
            credits_cell((credits or {}).get(view.id)),
            one_line(view.region or "-"),
            one_line(view.profile_arn or "-"),  # not a secret: it names the profile, it opens nothing
            one_line(view.proxy or "-"),  # its credentials masked
            _expiry(view, now),
            _timestamp(view.refreshed_at),
        )
        for view in views
    ]
    return _aligned(rows)


def _aligned(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip() for row in rows
    )


def _status(view: AccountView) -> str:
    if not view.enabled:
        return "disabled"
    if view.status_detail:
        return f"{view.status} ({view.status_detail})"
    if not view.has_refresh_token:
        return f"{view.status} (no refresh token)"
    return view.status


def _requests(stats: AccountStats | None) -> str:
    """`12 (1 failed)`: the calls every worker made with the account."""
    if stats is None:
        return "0"
    return f"{stats.requests} ({stats.failures} failed)" if stats.failures else str(stats.requests)


def _expiry(view: AccountView, now: float) -> str:
    if not view.has_access_token:
        return "-"
    if view.auth_method == API_KEY_AUTH:
        return "never (API key)"
    if view.expires_at is None:
        return "unknown"
    shown = _timestamp(view.expires_at)  # NaN and infinities are out of range too
    if shown == _NOT_A_TIME:
        return _NOT_A_TIME  # one bad row (an imported file's) must not break the list of every account
    remaining = view.expires_at - now
    if remaining <= 0:
        return f"{shown} (expired)"
    return f"{shown} (in {_duration(remaining)})"


def _timestamp(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(epoch).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):  # out of the platform's range (1e20, NaN…)
        return _NOT_A_TIME


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


# -- usage ---------------------------------------------------------------------


async def _usage(args: argparse.Namespace, settings: Settings) -> int:
    """Credits per account from Amazon Q (`getUsageLimits`), refreshing tokens when needed."""
    async with opened_store(settings) as store:
        views = [view for view in await store.list_views() if view.enabled]
        if args.account:
            views = _matching(views, args.account, by_id=True) or _matching(views, args.account, by_id=False)
            if not views:
                print(f"q2api accounts usage: no enabled account with id or label {args.account!r}", file=sys.stderr)
                return EXIT_NOT_FOUND
        if not views:
            print(f"No enabled accounts in {settings.data_dir}.")
            return EXIT_OK
        found = await read_usage(store, settings, [view.id for view in views])
    print(_aligned([USAGE_COLUMNS, *(usage_row(view.id, view.label, found.get(view.id)) for view in views)]))
    return EXIT_OK if any(found.values()) else EXIT_NOT_FOUND


# -- add -----------------------------------------------------------------------


async def _add(args: argparse.Namespace, settings: Settings) -> int:
    new = _new_account(args)
    async with opened_store(settings) as store:
        # Several accounts with this label: refuse before refreshing.
        account_id_for_label(await store.accounts(), new.label)
        verified = None if args.no_verify else await _verify(new, settings)
        if verified is None and not args.no_verify:
            return EXIT_REFUSED
        account, replaced = await store_new_account(store, new, verified)
    if replaced:
        print(
            f"Updated the credentials of account {one_line(account.id)} ({one_line(account.label)}, {account.auth_method})."
        )
    else:
        print(f"Added account {one_line(account.id)} ({one_line(account.label)}, {account.auth_method}).")
    if account.profile_arn:
        print(f"Amazon Q profile: {one_line(account.profile_arn)}")
    if args.no_verify:
        print("Not checked (--no-verify): the first request it serves will tell whether the token works.")
    print("A running `q2api serve` uses it within a few seconds.")
    return EXIT_OK


def _new_account(args: argparse.Namespace) -> NewAccount:
    """The account the arguments and secret variables describe: a Kiro API key, else a login."""
    region = (args.region or "").strip() or None
    if region is not None and not is_aws_region(region):
        raise _UsageError(f"--region must be an AWS region name such as us-east-1, not {region!r}")
    proxy_url = (args.proxy or "").strip() or None
    api_key = (os.environ.get(NEW_API_KEY_VARIABLE) or "").strip() or None
    if api_key:
        if args.refresh_token or args.client_id or args.client_secret or args.auth_method or args.profile_arn:
            raise _UsageError(
                f"{NEW_API_KEY_VARIABLE} adds a Kiro API key: --refresh-token, --client-id, --client-secret, "
                "--auth-method and --profile-arn belong to logins"
            )
        return NewAccount(label=args.label, api_key=api_key, region=region, proxy_url=proxy_url)
    refresh_token = _secret(args.refresh_token, NEW_REFRESH_TOKEN_VARIABLE, "refresh token")
    if not refresh_token:
        raise _UsageError(
            f"a refresh token is required: set {NEW_REFRESH_TOKEN_VARIABLE} "
            f"(or run the command on a terminal to be asked for it), or {NEW_API_KEY_VARIABLE} for a Kiro API key"
        )
    client_id = (args.client_id or "").strip() or None
    auth_method = args.auth_method or ("idc" if client_id else "social")
    client_secret = None
    if auth_method == "idc":
        if not client_id:
            raise _UsageError("--auth-method idc needs --client-id (the OIDC client registration)")
        client_secret = _secret(args.client_secret, NEW_CLIENT_SECRET_VARIABLE, "client secret")
        if not client_secret:
            raise _UsageError(f"an idc account needs its client secret: set {NEW_CLIENT_SECRET_VARIABLE}")
    elif client_id or args.client_secret:
        raise _UsageError("--client-id and --client-secret belong to idc accounts, not social ones")

    return NewAccount(
        label=args.label,
        refresh_token=refresh_token,
        client_id=client_id,
        client_secret=client_secret,
        profile_arn=(args.profile_arn or "").strip() or None,
        region=region,
        proxy_url=proxy_url,
    )


async def _verify(new: NewAccount, settings: Settings) -> RefreshedToken | None:
    """One real refresh (or, for an API key, one call) with the new credentials; None (after saying why)
    when it does not work."""
    try:
        async with upstream_session() as session:
            proxies = AccountProxies(session)
            try:
                return await verify_new_account(
                    session,
                    refresh_endpoints(settings),
                    new,
                    proxies=proxies,
                    amazonq_endpoints=api_key_check_urls(settings, new.region),
                )
            finally:
                await proxies.close()
    except RefreshRejected as exc:
        what = "Amazon Q refused this API key" if new.api_key else "the token service refused this refresh token"
        print(f"q2api accounts add: {what} ({exc.detail}); nothing was stored.", file=sys.stderr)
    except RefreshUnavailable as exc:
        print(
            f"q2api accounts add: could not check the credentials ({exc}); nothing was stored. "
            "Try again, or store it unchecked with --no-verify.",
            file=sys.stderr,
        )
    return None


def _secret(given: str | None, variable: str, what: str) -> str | None:
    """The flag, else the environment variable, else a hidden prompt on a terminal."""
    if given and given.strip():
        print(
            f"warning: the {what} was given on the command line, where other users of this machine can read it"
            f" (ps, shell history); set {variable} instead",
            file=sys.stderr,
        )
    for candidate in (given, os.environ.get(variable)):
        if candidate and candidate.strip():
            return candidate.strip()
    if not sys.stdin.isatty():
        return None
    try:
        return getpass.getpass(f"{what} (input hidden): ").strip() or None
    except EOFError:  # Ctrl-D at the prompt: treated as no answer
        return None


# -- remove --------------------------------------------------------------------


async def _remove(args: argparse.Namespace, settings: Settings) -> int:
    async with opened_store(settings) as store:
        account = await _one_account(store, args.account, "remove")
        if account is None:
            return EXIT_NOT_FOUND
        await store.remove(account.id)
    print(f"Removed account {one_line(account.id)} ({one_line(account.label)}).")
    if account.id == ENV_ACCOUNT_ID and settings.has_env_account:
        print("Note: AMAZONQ_REFRESH_TOKEN / AMAZONQ_ACCESS_TOKEN are still set, so the next start adds it again.")
    return EXIT_OK


# -- enable / disable -------------------------------------------------------------


async def _enable(args: argparse.Namespace, settings: Settings) -> int:
    return await _switch(args, settings, enabled=True)


async def _disable(args: argparse.Namespace, settings: Settings) -> int:
    return await _switch(args, settings, enabled=False)


async def _switch(args: argparse.Namespace, settings: Settings, *, enabled: bool) -> int:
    async with opened_store(settings) as store:
        account = await _one_account(store, args.account, "enable" if enabled else "disable")
        if account is None:
            return EXIT_NOT_FOUND
        await store.update(account.id, enabled=enabled)
    what = "Enabled" if enabled else "Disabled"
    print(
        f"{what} account {one_line(account.id)} ({one_line(account.label)}); a running gateway follows within a few seconds."
    )
    return EXIT_OK


async def _one_account(store: AccountStore, wanted: str, command: str) -> AccountView | None:
    """The account with id or label `wanted`, or None after saying why there is not exactly one."""
    views = await store.list_views()
    matches = _matching(views, wanted, by_id=True) or _matching(views, wanted, by_id=False)
    if not matches:
        print(f"q2api accounts {command}: no account with id or label {wanted!r}", file=sys.stderr)
        return None
    if len(matches) > 1:
        ids = ", ".join(view.id for view in matches)
        print(f"q2api accounts {command}: {wanted!r} labels several accounts ({ids}); give the id", file=sys.stderr)
        return None
    return matches[0]


def _matching(views: Sequence[AccountView], wanted: str, *, by_id: bool) -> list[AccountView]:
    return [view for view in views if (view.id if by_id else view.label) == wanted]
