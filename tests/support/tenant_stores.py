"""The tenants' stores on each database the tests run on: SQLite in a temporary directory, and a
scratch schema on the PostgreSQL and MariaDB servers (skipped, naming the server, when one is absent);
Redis for the counters (a database of its own, emptied, skipped when no server answers)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import scratch_database_url

REDIS_URL = os.environ.get("Q2API_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
DATABASE_KINDS = ("sqlite", "postgresql", "mysql")


@contextlib.contextmanager
def database_url_for(kind: str, tmp_path: Path) -> Iterator[str | None]:
    """None (the SQLite store in `tmp_path`) or a scratch schema's URL."""
    if kind == "sqlite":
        yield None
        return
    with scratch_database_url(kind) as url:
        yield url


def empty_redis() -> str:
    """REDIS_URL, its database emptied; skips the test when no Redis answers."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.flushdb()
    except redis.exceptions.ConnectionError as exc:
        pytest.skip(f"no Redis server at {REDIS_URL}: {type(exc).__name__}")
    finally:
        client.close()
    return REDIS_URL
