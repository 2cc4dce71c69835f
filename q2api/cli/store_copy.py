"""`q2api accounts copy --from STORE [--to STORE]`: move accounts between the SQLite store and a shared one.

A STORE is a data directory (the SQLite store in it) or a database URL
(`postgresql://…`, `mysql://…`); `--to` defaults to the store the settings
name. Accounts travel whole: id, label, enabled flag, login state and the
newest (rotated) tokens, so the gateway on the target continues where the
source stopped. An account the target already has is left alone unless
`--replace`: its tokens may be newer than the source's. Shared stores on both
ends are opened with the same `Q2API_SECRET_KEY`.
"""

from __future__ import annotations

import argparse
import sys

from q2api.amazonq.accounts.opening import open_account_store
from q2api.amazonq.accounts.store_protocol import AccountStore
from q2api.settings import Settings


def copy_accounts(args: argparse.Namespace, settings: Settings) -> int:
    source = _open(args.source, settings)
    target = _open(args.target, settings) if args.target else _open_configured(settings)
    try:
        if source.location == target.location:
            raise ValueError(f"--from and --to name the same store ({source.location})")
        print(f"copying from {source.location} to {target.location}", file=sys.stderr)
        present = {account.id for account in target.accounts()}
        copied = skipped = 0
        for account in source.accounts():
            if account.id in present and not args.replace:
                print(f"skipped {account.id} ({account.label}): already in the target (--replace overwrites it)")
                skipped += 1
                continue
            target.import_account(account)
            print(f"copied {account.id} ({account.label}, {account.auth_method})")
            copied += 1
        print(f"{copied} account(s) copied, {skipped} skipped")
    finally:
        source.close()
        target.close()
    return 0


def _open(spec: str, settings: Settings) -> AccountStore:
    """A database URL opens the shared store, anything else is a data directory."""
    if "://" in spec:
        return open_account_store(spec, settings.data_dir, settings.secret_key)
    return open_account_store(None, spec, None)


def _open_configured(settings: Settings) -> AccountStore:
    return open_account_store(settings.database_url, settings.data_dir, settings.secret_key)
