"""Real database servers for the store tests: a private schema per test, dropped afterwards.

PostgreSQL: a schema in the `test` database, selected through the URL's
`options=-csearch_path=…`. MySQL/MariaDB: a database of its own. The servers
default to the local ones (trust / empty-password auth); override with
`Q2API_TEST_POSTGRES_URL` / `Q2API_TEST_MYSQL_URL`. A server that does not
answer skips the test, naming the server, never passes it.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from q2api.amazonq.accounts.database_url import parse_database_url

POSTGRES_ADMIN_URL = os.environ.get("Q2API_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL_ADMIN_URL = os.environ.get("Q2API_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
SHARED_KINDS = ("postgresql", "mysql")
TEST_SECRET_KEY = Fernet.generate_key().decode()


@contextlib.contextmanager
def scratch_database_url(kind: str) -> Iterator[str]:
    """A `Q2API_DATABASE_URL` for an empty schema of its own on the `kind` server."""
    admin_url = POSTGRES_ADMIN_URL if kind == "postgresql" else MYSQL_ADMIN_URL
    name = f"q2api_t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(parse_database_url(admin_url).url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text(f"CREATE {'SCHEMA' if kind == 'postgresql' else 'DATABASE'} {name}"))
            connection.commit()
    except sa.exc.OperationalError as exc:
        engine.dispose()
        pytest.skip(f"no {kind} server at {parse_database_url(admin_url).masked}: {type(exc.orig).__name__}")
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
        with engine.connect() as connection:
            drop = f"DROP SCHEMA {name} CASCADE" if kind == "postgresql" else f"DROP DATABASE {name}"
            connection.execute(sa.text(drop))
            connection.commit()
        engine.dispose()
