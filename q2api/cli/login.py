"""`q2api login`: a device-code login on the command line, ending in a stored account."""

from __future__ import annotations

import argparse
import asyncio
import sys

from q2api.accounts.device_login import DeviceLoginError, LoginFailed, login_target, start_device_login
from q2api.accounts.field_limits import check_account_fields
from q2api.accounts.logins import complete_device_login
from q2api.accounts.records import Account
from q2api.accounts.store_protocol import CredentialStore
from q2api.cli.accounts import opened_store
from q2api.log_text import one_line
from q2api.server.wiring import refresh_endpoints, upstream_session
from q2api.settings import Settings, SettingsError, load_settings

EXIT_OK = 0
EXIT_LOGIN_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def run_login(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"q2api: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        start_url, region = login_target(args.method, args.start_url, args.region)
        if args.label:
            check_account_fields(label=args.label)  # before the login: its account could not be stored afterwards
    except ValueError as exc:
        print(f"q2api login: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        account = asyncio.run(_login(settings, args.label, method=args.method, start_url=start_url, region=region))
    except KeyboardInterrupt:
        print("\nq2api login: cancelled, nothing stored", file=sys.stderr)
        return EXIT_INTERRUPTED
    except DeviceLoginError as exc:
        print(f"q2api login: {exc}; nothing stored", file=sys.stderr)
        return EXIT_LOGIN_FAILED
    print(f"Signed in: account {one_line(account.id)} ({one_line(account.label)}, idc) is stored.")
    if account.profile_arn:
        print(f"Amazon Q profile: {one_line(account.profile_arn)}")
    print("A running `q2api serve` uses it within a few seconds.")
    return EXIT_OK


async def _login(settings: Settings, label: str | None, *, method: str, start_url: str, region: str) -> Account:
    async with opened_store(settings) as store, upstream_session() as session:
        label = label or await _free_label(store, method)
        oidc_url = refresh_endpoints(settings).oidc_for(region)
        try:
            login = await start_device_login(session, oidc_url, start_url)
        except LoginFailed as exc:
            raise LoginFailed(f"could not start the login: {exc}") from None
        authorization = login.authorization
        print(f"Open this address in a browser and confirm the code {authorization.user_code}:")
        print(f"  {authorization.verification_uri_complete}")
        print(f"(or open {authorization.verification_uri} and type the code)")
        print(f"Waiting up to {int(authorization.expires_in // 60)} min for the approval… (Ctrl-C cancels)", flush=True)
        return await complete_device_login(
            session,
            store,
            login,
            label=label,
            region=region,
            profile_hosts=refresh_endpoints(settings).profile_hosts,
        )


async def _free_label(store: CredentialStore, method: str) -> str:
    """`builder-id`, or `builder-id-2`, … when taken: a login without --label never replaces another account."""
    taken = {account.label for account in await store.accounts()}
    label, serial = method, 1
    while label in taken:
        serial += 1
        label = f"{method}-{serial}"
    return label
