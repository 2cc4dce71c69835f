"""Real database servers for the store tests: a private schema per test, dropped afterwards.

PostgreSQL: a schema in the `test` database, selected through the URL's
`options=-csearch_path=…`. MySQL/MariaDB: a database of its own. The servers
default to the local ones (trust / empty-password auth); override with
`Q2API_TEST_POSTGRES_URL` / `Q2API_TEST_MYSQL_URL`. A server that does not
answer skips the test, naming the server, never passes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from q2api.store.database_url import parse_database_url

POSTGRES_ADMIN_URL = os.environ.get("Q2API_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL_ADMIN_URL = os.environ.get("Q2API_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
SHARED_KINDS = ("postgresql", "mysql")
TEST_SECRET_KEY = Fernet.generate_key().decode()
T = TypeVar("T")


def run_sql(database_url: str, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """`work` in one committed transaction on `database_url`, from sync and async tests alike.

    It runs on an event loop of its own in another thread: an async test's loop is already running.
    """

    async def run() -> T:
        engine_url, connect_args = parse_database_url(database_url).engine_arguments()
        engine = create_async_engine(engine_url, connect_args=connect_args, poolclass=sa.NullPool)
        try:
            async with engine.begin() as connection:
                return await work(connection)
        finally:
            await engine.dispose()

    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, run()).result()


def raw_rows(database_url: str, table: sa.Table) -> list[sa.Row]:
    """The rows of `table` as the database holds them (no decryption)."""

    async def select(connection: AsyncConnection) -> list[sa.Row]:
        return list(await connection.execute(sa.select(table)))

    return run_sql(database_url, select)


@contextlib.contextmanager
def scratch_database_url(kind: str) -> Iterator[str]:
    """A `Q2API_DATABASE_URL` for an empty schema of its own on the `kind` server."""
    admin_url = POSTGRES_ADMIN_URL if kind == "postgresql" else MYSQL_ADMIN_URL
    name = f"q2api_t_{uuid.uuid4().hex[:12]}"

    def execute(sql: str) -> Callable[[AsyncConnection], Awaitable[object]]:
        return lambda connection: connection.execute(sa.text(sql))

    try:
        run_sql(admin_url, execute(f"CREATE {'SCHEMA' if kind == 'postgresql' else 'DATABASE'} {name}"))
    except (sa.exc.OperationalError, sa.exc.InterfaceError, OSError) as exc:
        pytest.skip(f"no {kind} server at {parse_database_url(admin_url).masked}: {type(exc).__name__}")
    try:
        if kind == "postgresql":
            yield (
                admin_url
                + ("&" if "?" in admin_url else "?")
                + "options="
                + urllib.parse.quote(f"-csearch_path={name}")
            )
        else:
            yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        drop = f"DROP SCHEMA {name} CASCADE" if kind == "postgresql" else f"DROP DATABASE {name}"
        run_sql(admin_url, execute(drop))
