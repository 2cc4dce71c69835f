"""What the admin API works with: the gateway's own store, pool, reloader and HTTP session."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp

from q2api.amazonq.accounts.pool import AccountPool
from q2api.amazonq.accounts.records import Account
from q2api.amazonq.accounts.refresh import RefreshEndpoints
from q2api.amazonq.accounts.reload import AccountReloader
from q2api.amazonq.accounts.store_protocol import AccountStore

if TYPE_CHECKING:
    from q2api.admin.activity import ActivityLog

# The model catalogue as `GET /v1/models` lists it (its `data` entries).
ModelCatalogue = Callable[[], Sequence[dict[str, Any]]]
# An account's credits (`{"subscription", "used", "limit", "resets_at"}`), or None when unknown.
UsageLookup = Callable[[Account], Awaitable[dict[str, Any] | None]]


@dataclasses.dataclass(frozen=True)
class AdminContext:
    store: AccountStore
    pool: AccountPool
    reloader: AccountReloader
    session: aiohttp.ClientSession
    endpoints: RefreshEndpoints
    # None until the gateway has a getUsageLimits client: `…/usage` answers 501 and lists show null.
    usage: UsageLookup | None = None
    # The last requests this worker served (`/admin/api/activity`); None = an empty list.
    activity: ActivityLog | None = None
    # The catalogue `/admin/api/models` shows; None = an empty list.
    models: ModelCatalogue | None = None
