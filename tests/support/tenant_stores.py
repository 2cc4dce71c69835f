"""The tenants' stores on each database the tests run on: SQLite in a temporary directory, and a
scratch schema on the PostgreSQL and MariaDB servers (skipped, naming the server, when one is absent);
Redis for the counters: a key prefix of the test's own in `Q2API_TEST_REDIS_URL`'s database, whose
keys are deleted afterwards (skipped when no server answers). Nothing else in that database is read,
written or deleted: it may be anyone's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from q2api.tenants.redis_counters import RedisCounters
from tests.support.databases import scratch_database_url

REDIS_URL = os.environ.get("Q2API_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
DATABASE_KINDS = ("sqlite", "postgresql", "mysql")
# This test process's part of every prefix (a run, or one xdist worker of it, each its own), then a
# number per test: `q2api-test-gw1-3f9c2a7e-12`.
_PROCESS_PREFIX = f"q2api-test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{secrets.token_hex(4)}"
_NUMBERS = itertools.count(1)


@contextlib.contextmanager
def database_url_for(kind: str, tmp_path: Path) -> Iterator[str | None]:
    """None (the SQLite store in `tmp_path`) or a scratch schema's URL."""
    if kind == "sqlite":
        yield None
        return
    with scratch_database_url(kind) as url:
        yield url


@dataclasses.dataclass(frozen=True)
class ScratchRedis:
    url: str
    prefix: str  # every key the test's counters write starts with `prefix:`

    @property
    def env(self) -> dict[str, str]:
        """The gateway's settings for counting in this place."""
        return {"Q2API_REDIS_URL": self.url, "Q2API_REDIS_PREFIX": self.prefix}

    def counters(self) -> RedisCounters:
        return RedisCounters(self.url, self.prefix)


@contextlib.contextmanager
def scratch_redis() -> Iterator[ScratchRedis]:
    """A prefix no other test, run or worker uses, in REDIS_URL's database; its keys are deleted when
    the block ends. Skips the test when no Redis answers."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        client.close()
        pytest.skip(f"no Redis server at {REDIS_URL}: {type(exc).__name__}")
    place = ScratchRedis(REDIS_URL, f"{_PROCESS_PREFIX}-{next(_NUMBERS)}")
    try:
        yield place
    finally:
        try:
            delete_prefixed(client, place.prefix)
        finally:
            client.close()


def delete_prefixed(client: redis.Redis, prefix: str) -> int:
    """Delete every key under `prefix:` (and nothing else); how many there were."""
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}:*", count=500):
        batch.append(key)
        if len(batch) == 500:
            deleted += client.delete(*batch)
            batch.clear()
    if batch:
        deleted += client.delete(*batch)
    return deleted
