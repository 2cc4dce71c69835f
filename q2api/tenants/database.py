"""Where the tenants' tables live: the store's database (q2api.store), the SQLite file or a shared one.

Every query is written once, as a plain (synchronous) SQLAlchemy function of a connection, run on a
worker thread for the SQLite file, through the asyncio engine's `run_sync` on a shared database
(bounded in time, faults as StoreUnavailable, deadlock victims run again). The gateway opens the
database once for everything it keeps there, the tenants' chain of migrations among the others
(q2api.server.gateway); a command that needs the tenants' tables alone opens them here.
"""

from __future__ import annotations

from pathlib import Path

from q2api.store.database import StoreDatabase
from q2api.store.opening import open_database
from q2api.tenants.tables import TENANT_MIGRATIONS


async def open_tenant_database(database_url: str | None, data_dir: str | Path) -> StoreDatabase:
    """The tenants' tables beside the accounts (`database_url` empty: the SQLite store's file), migrated.

    Raises ValueError for a malformed URL, StoreUnavailable when the database cannot be reached or
    migrated (SchemaTooNew when a newer q2api migrated it).
    """
    return await open_database(database_url, data_dir, (TENANT_MIGRATIONS,))
