"""`q2api accounts import`: store the logins Kiro IDE, kiro-cli or the Amazon Q CLI already hold.

Without a source option it looks where those tools keep them (`~/.aws/sso/cache`
and the platform's data directory); with `--kiro-ide DIR` / `--kiro-cli FILE`
it reads only what it is given. Each login becomes an account labelled after
its source (or `--label`); a label that exists already gets the new credentials,
so importing again after a new sign-in repairs an account that needs a login.
Nothing secret is printed: only sources, labels, ids and auth methods.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from q2api.accounts.device_login import is_aws_region
from q2api.accounts.kiro_import import (
    KIRO_IDE_TOKEN_FILE,
    UNSUPPORTED_AUTH_KV_TOKENS,
    CredentialImportError,
    ImportedLogin,
    default_cli_databases,
    default_kiro_ide_dir,
    parse_auth_kv,
    read_auth_kv,
    read_kiro_ide,
)
from q2api.accounts.opening import opened_account_store
from q2api.log_text import one_line
from q2api.settings import Settings

EXIT_OK = 0
EXIT_NOTHING_IMPORTED = 1


async def run_import(args: argparse.Namespace, settings: Settings) -> int:
    explicit = args.kiro_ide is not None or args.kiro_cli is not None
    logins, problems, looked_in = _collect(args, explicit)
    for problem in problems:
        print(f"q2api accounts import: {one_line(problem)}", file=sys.stderr)
    now = time.time()
    usable = []
    for login in logins:
        if login.registration_expired(now):
            print(
                f"q2api accounts import: skipped {one_line(login.origin)}: its client registration expired on "
                f"{_date(login.registration_expires_at)}; sign in to {login.source} again, then import again",
                file=sys.stderr,
            )
            problems.append(login.origin)
        else:
            usable.append(login)
    if not usable:
        if not logins and not problems:
            print("Nothing to import: no Kiro IDE, kiro-cli or Amazon Q CLI login in " + ", ".join(looked_in) + ".")
        return EXIT_NOTHING_IMPORTED

    async with opened_account_store(settings.database_url, settings.data_dir, settings.secret_key) as store:
        print(f"Store: {store.location}")
        existing = {view.label: view.id for view in await store.list_views()}
        for login, label in zip(usable, account_labels(usable, args.label), strict=True):
            account = await store.add(
                auth_method=login.auth_method,
                refresh_token=login.refresh_token,
                label=label,
                client_id=login.client_id,
                client_secret=login.client_secret,
                profile_arn=login.profile_arn,
                access_token=login.access_token,
                expires_at=login.expires_at,
                account_id=existing.get(label),
                region=_region(login),
            )
            verb = "Updated" if label in existing else "Imported"
            # What the imported files say (a provider name, the label made from them) reaches a terminal: escaped.
            provider = f", {one_line(login.provider)}" if login.provider else ""
            region = f", region {one_line(account.region)}" if account.region else ""
            print(
                f"{verb} account {one_line(account.id)} ({one_line(label)}, {login.auth_method}{provider}{region}) "
                f"from {one_line(login.origin)}"
            )
    print("A running `q2api serve` uses them within a few seconds.")
    return EXIT_OK if not problems else EXIT_NOTHING_IMPORTED


def account_labels(logins: Sequence[ImportedLogin], label: str | None) -> list[str]:
    """One label per login: `--label` or the source, made distinct when several logins are imported."""
    if label and len(logins) == 1:
        return [label]
    names = [f"{label}-{login.source}" if label else login.source for login in logins]
    repeated = Counter(names)
    return [
        f"{name}-{login.auth_method}" if repeated[name] > 1 else name for name, login in zip(names, logins, strict=True)
    ]


def _collect(args: argparse.Namespace, explicit: bool) -> tuple[list[ImportedLogin], list[str], list[str]]:
    """The logins found, the problems met, and where it looked."""
    ide_dirs = [Path(args.kiro_ide).expanduser()] if args.kiro_ide else []
    databases = [Path(args.kiro_cli).expanduser()] if args.kiro_cli else []
    if not explicit:
        ide_dirs = [default_kiro_ide_dir()]
        databases = default_cli_databases()
    logins: list[ImportedLogin] = []
    problems: list[str] = []
    for directory in ide_dirs:
        if not explicit and not (directory / KIRO_IDE_TOKEN_FILE).is_file():
            continue  # Kiro IDE is simply not installed or signed in here
        try:
            logins.append(read_kiro_ide(directory))
        except CredentialImportError as exc:
            problems.append(str(exc))
    for database in databases:
        if not explicit and not database.is_file():
            continue
        try:
            entries = read_auth_kv(database)
            found = parse_auth_kv(entries, origin=str(database))
        except CredentialImportError as exc:
            problems.append(str(exc))
            continue
        for key in UNSUPPORTED_AUTH_KV_TOKENS:
            if key in entries:
                problems.append(f"{database} [{key}]: external-IdP logins are not supported; skipped")
        if not found and not any(key in entries for key in UNSUPPORTED_AUTH_KV_TOKENS):
            problems.append(f"{database}: holds no login (sign in with the CLI first)")
        logins.extend(found)
    looked_in = [str(directory / KIRO_IDE_TOKEN_FILE) for directory in ide_dirs] + [str(db) for db in databases]
    return logins, problems, looked_in


def _region(login: ImportedLogin) -> str | None:
    """The region an IdC login refreshes in (the account keeps it); social logins have none that matters."""
    if login.auth_method != "idc" or not login.region or not is_aws_region(login.region):
        return None
    return login.region


def _date(epoch: float | None) -> str:
    if epoch is None:
        return "an unknown date"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
