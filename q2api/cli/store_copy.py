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
import contextlib
import sys

from q2api.accounts.opening import opened_account_store
from q2api.accounts.store_protocol import AccountStore
from q2api.log_text import one_line
from q2api.settings import Settings


async def copy_accounts(args: argparse.Namespace, settings: Settings) -> int:
    async with contextlib.AsyncExitStack() as stores:
        source = await stores.enter_async_context(_opened(args.source, settings))
        target = await stores.enter_async_context(
            _opened(args.target, settings) if args.target else _opened_configured(settings)
        )
        if source.location == target.location:
            raise ValueError(f"--from and --to name the same store ({source.location})")
        print(f"copying from {source.location} to {target.location}", file=sys.stderr)
        present = {account.id for account in await target.accounts()}
        copied = skipped = 0
        for account in await source.accounts():
            if account.id in present and not args.replace:
                print(
                    f"skipped {one_line(account.id)} ({one_line(account.label)}): already in the target (--replace overwrites it)"
                )
                skipped += 1
                continue
            await target.import_account(account)
            print(f"copied {one_line(account.id)} ({one_line(account.label)}, {account.auth_method})")
            copied += 1
        print(f"{copied} account(s) copied, {skipped} skipped")
    return 0


def _opened(spec: str, settings: Settings) -> contextlib.AbstractAsyncContextManager[AccountStore]:
    """A database URL opens the shared store, anything else is a data directory."""
    if "://" in spec:
        return opened_account_store(spec, settings.data_dir, settings.secret_key)
    return opened_account_store(None, spec, None)


def _opened_configured(settings: Settings) -> contextlib.AbstractAsyncContextManager[AccountStore]:
    return opened_account_store(settings.database_url, settings.data_dir, settings.secret_key)
