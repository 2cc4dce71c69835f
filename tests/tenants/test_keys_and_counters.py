"""Keys kept in the store and the counters their limits are held to, on SQLite, PostgreSQL, MariaDB and Redis."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis
import sqlalchemy as sa

from q2api.anthropic.errors import AnthropicError
from q2api.tenants.counters import StoreCounters
from q2api.tenants.database import open_tenant_database
from q2api.tenants.gate import LimitGate
from q2api.tenants.keys import KeyLimits, KeyProblem, KeyStore, key_digest, parse_expiry
from q2api.tenants.tables import client_keys
from tests.support.tenant_stores import DATABASE_KINDS, ScratchRedis, database_url_for, scratch_redis

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=DATABASE_KINDS)
def database_url(request, tmp_path):
    with database_url_for(request.param, tmp_path) as url:
        yield url


# 5 s into a minute (and hours from a day's end): a test's admissions share their windows however
# long it runs, where the wall clock would let a minute or a day end between two of them.
MID_MINUTE = 6000.0 * 60 + 5


@pytest.fixture(params=["store", "redis"])
def redis_place(request) -> Iterator[ScratchRedis | None]:
    """Where the counters keep their counts: None for the store itself, else a place in Redis."""
    if request.param == "store":
        yield None
        return
    with scratch_redis() as place:
        yield place


def _counters(redis_place, database):
    return redis_place.counters() if redis_place is not None else StoreCounters(database)


async def test_a_created_key_is_returned_once_and_only_its_hash_is_stored(database_url, tmp_path):
    database = await open_tenant_database(database_url, tmp_path)
    try:
        keys = KeyStore(database)
        key, record = await keys.create("ci-bot", KeyLimits(models=("claude-sonnet-4-5",), rpm=10))
        assert key.startswith("q2k_") and len(key) > 40
        rows = await database.read(lambda db: [dict(row._mapping) for row in db.execute(sa.select(client_keys))])
        assert len(rows) == 1
        stored = " ".join(str(value) for value in rows[0].values())
        assert key not in stored and key[10:] not in stored
        assert rows[0]["key_hash"] == hashlib.sha256(key.encode()).hexdigest()
        found = await keys.by_digest(key_digest(key))
        assert found is not None and found.label == "ci-bot" and found.limits.models == ("claude-sonnet-4-5",)
        with pytest.raises(KeyProblem, match="label"):
            await keys.create("ci-bot", KeyLimits())
        updated = await keys.update("ci-bot", {"rpm": None, "tpm": 5000})
        assert updated.limits.rpm is None and updated.limits.tpm == 5000
        assert (await keys.find(record.id)).limits.tpm == 5000
        revoked = await keys.revoke("ci-bot")
        assert revoked.revoked_at is not None
        assert await keys.count_usable() == 0
    finally:
        await database.close()


async def test_bad_limits_name_their_field(tmp_path):
    database = await open_tenant_database(None, tmp_path)
    try:
        keys = KeyStore(database)
        with pytest.raises(KeyProblem, match="rpm"):
            await keys.create("a", KeyLimits(rpm=0))
        with pytest.raises(KeyProblem, match="max_concurrent"):
            await keys.create("a", KeyLimits(max_concurrent=1.5))  # type: ignore[arg-type]
        with pytest.raises(KeyProblem, match="label"):
            await keys.create("", KeyLimits())
        with pytest.raises(KeyProblem, match="expires"):
            parse_expiry("next tuesday")
        assert parse_expiry("30d", now=1000.0) == 1000.0 + 30 * 86400
        assert parse_expiry("2027-01-01") == 1798761600.0
    finally:
        await database.close()


async def test_rpm_admits_exactly_the_limit_then_refuses_until_the_next_minute(database_url, tmp_path, redis_place):
    database = await open_tenant_database(database_url, tmp_path)
    counters = _counters(redis_place, database)
    now = [MID_MINUTE]
    gate = LimitGate(counters, clock=lambda: now[0])
    try:
        _key, record = await KeyStore(database).create("rpm", KeyLimits(rpm=3))
        for n in range(3):
            admission = await gate.admit(record, "m", 10)
            assert admission.headers["anthropic-ratelimit-requests-remaining"] == str(2 - n)
        with pytest.raises(AnthropicError) as refused:
            await gate.admit(record, "m", 10)
        assert refused.value.status == 429 and refused.value.headers["retry-after"] == "55"
        assert refused.value.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert "3 requests a minute" in refused.value.message
        now[0] += 55
        await gate.admit(record, "m", 10)
    finally:
        await counters.close()
        await database.close()


async def test_concurrency_and_budget_and_tokens(database_url, tmp_path, redis_place):
    database = await open_tenant_database(database_url, tmp_path)
    counters = _counters(redis_place, database)
    gate = LimitGate(counters, clock=lambda: MID_MINUTE)
    try:
        store = KeyStore(database)
        _key, busy = await store.create("busy", KeyLimits(max_concurrent=2))
        first, second = await gate.admit(busy, "m", 1), await gate.admit(busy, "m", 1)
        with pytest.raises(AnthropicError, match="concurrent"):
            await gate.admit(busy, "m", 1)
        await gate.settle(first, 0, 0.0)
        third = await gate.admit(busy, "m", 1)
        await gate.settle(second, 0, 0.0)
        await gate.settle(third, 0, 0.0)

        _key, budget = await store.create("budget", KeyLimits(credits_per_day=1.0))
        spent = await gate.admit(budget, "m", 1)
        await gate.settle(spent, 0, 0.6)
        spent = await gate.admit(budget, "m", 1)  # 0.6 < 1.0: still admitted
        await gate.settle(spent, 0, 0.6)
        with pytest.raises(AnthropicError, match="credits a day") as refused:
            await gate.admit(budget, "m", 1)
        assert refused.value.status == 429 and int(refused.value.headers["retry-after"]) > 0
        assert (await gate.spent(budget))["credits_today"] == pytest.approx(1.2)

        _key, tokens = await store.create("tokens", KeyLimits(tpm=1000))
        counted = await gate.admit(tokens, "m", 400)
        await gate.settle(counted, 900, 0.0)  # the reply really used 900: corrected upwards
        with pytest.raises(AnthropicError, match="tokens a minute"):
            await gate.admit(tokens, "m", 200)
        await gate.admit(tokens, "m", 100)  # exactly at the limit: admitted
    finally:
        await counters.close()
        await database.close()


async def test_racing_admissions_never_take_more_than_the_limit(database_url, tmp_path, redis_place):
    database = await open_tenant_database(database_url, tmp_path)
    counters = _counters(redis_place, database)
    gate = LimitGate(counters, clock=lambda: MID_MINUTE)
    try:
        _key, record = await KeyStore(database).create("race", KeyLimits(rpm=7))

        async def one() -> bool:
            try:
                await gate.admit(record, "m", 1)
            except AnthropicError:
                return False
            return True

        outcomes = await asyncio.gather(*(one() for _ in range(20)))
        assert sum(outcomes) == 7
    finally:
        await counters.close()
        await database.close()


async def test_model_and_standing_checks(tmp_path):
    database = await open_tenant_database(None, tmp_path)
    gate = LimitGate(StoreCounters(database))
    try:
        store = KeyStore(database)
        _key, record = await store.create("one-model", KeyLimits(models=("claude-haiku-4-5",)))
        with pytest.raises(AnthropicError, match="claude-haiku-4-5") as refused:
            await gate.admit(record, "claude-opus-4-5", 1)
        assert refused.value.status == 403
        _key, old = await store.create("old", KeyLimits(expires_at=1.0))
        with pytest.raises(AnthropicError, match="expired") as refused:
            await gate.admit(old, "m", 1)
        assert refused.value.status == 401
        revoked = await store.revoke("one-model")
        with pytest.raises(AnthropicError, match="revoked"):
            await gate.admit(revoked, "claude-haiku-4-5", 1)
    finally:
        await database.close()


async def test_two_updates_of_one_key_at_once_both_take_effect(database_url, tmp_path, monkeypatch):
    """Two operators change different limits of one key at the same moment: neither change is lost."""
    database = await open_tenant_database(database_url, tmp_path)
    try:
        keys = KeyStore(database)
        await keys.create("ci-bot", KeyLimits())
        answer_now = database.read

        async def answer_late(work):  # every read answers late: both updates read before either writes
            answer = await answer_now(work)
            await asyncio.sleep(0.2)
            return answer

        monkeypatch.setattr(database, "read", answer_late)
        await asyncio.gather(keys.update("ci-bot", {"rpm": 10}), keys.update("ci-bot", {"tpm": 5000}))
        limits = (await keys.find("ci-bot")).limits
        assert limits.rpm == 10 and limits.tpm == 5000
    finally:
        await database.close()


async def test_a_label_taken_between_the_check_and_the_write_is_a_conflict_not_a_store_fault(
    database_url, tmp_path, monkeypatch
):
    """Two operators (or replicas) create or rename keys to one label at once: both checks find it free,
    and the unique index refuses the later write. That is the same 409 as a label found taken."""
    from q2api.tenants import keys as key_module

    database = await open_tenant_database(database_url, tmp_path)
    try:
        keys = KeyStore(database)
        await keys.create("taken", KeyLimits())
        await keys.create("other", KeyLimits())
        real_check = key_module._check_label_free
        checks: list[str] = []

        def check_before_the_other_commits(db, label):  # the first check of each write sees the label free
            checks.append(label)
            if len(checks) % 2 == 0:
                real_check(db, label)

        monkeypatch.setattr(key_module, "_check_label_free", check_before_the_other_commits)
        with pytest.raises(KeyProblem, match="exists already") as created:
            await keys.create("taken", KeyLimits())
        with pytest.raises(KeyProblem, match="exists already") as renamed:
            await keys.update("other", {"label": "taken", "rpm": 5})
        assert created.value.conflict and renamed.value.conflict and checks == ["taken"] * 4
        monkeypatch.undo()
        assert [record.label for record in await keys.list()] == ["taken", "other"]
        assert (await keys.find("other")).limits.rpm is None  # the refused rename changed nothing
        await keys.update("other", {"label": "free", "rpm": 5})  # and the transaction machinery is sound
        assert (await keys.find("free")).limits.rpm == 5
    finally:
        await database.close()


async def test_a_place_in_flight_is_held_while_renewed_and_expires_when_it_is_not(
    database_url, tmp_path, redis_place, monkeypatch
):
    """A place lives LEASE_SECONDS past its taking or last renewal: a worker that dies (renewing nothing)
    blocks a key's concurrency that long at most, where it blocked it for 30 minutes."""
    from q2api.tenants import counters as counters_module
    from q2api.tenants import redis_counters

    monkeypatch.setattr(counters_module, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(redis_counters, "LEASE_SECONDS", 1.0)
    database = await open_tenant_database(database_url, tmp_path)
    counters = _counters(redis_place, database)
    gate = LimitGate(counters)
    try:
        _key, one = await KeyStore(database).create("one-at-a-time", KeyLimits(max_concurrent=1))
        running = await gate.admit(one, "m", 1)
        for _ in range(3):  # 1.8 s in all, past LEASE_SECONDS: renewed, the place is still taken
            await asyncio.sleep(0.6)
            await gate.renew_leases()
            with pytest.raises(AnthropicError, match="concurrent"):
                await gate.admit(one, "m", 1)
        await asyncio.sleep(1.3)  # not renewed (as if its worker had died): the place is free again
        await gate.admit(one, "m", 1)
        await gate.settle(running, 0, 0.0)
    finally:
        await counters.close()
        await database.close()


async def test_a_place_is_renewed_no_longer_than_any_request_runs(tmp_path, monkeypatch):
    """A request whose end is never settled (a bug) must not hold its key's place for ever."""
    from q2api.tenants import counters as counters_module
    from q2api.tenants import gate as gate_module

    monkeypatch.setattr(counters_module, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(gate_module, "LEASE_MAX_SECONDS", 0.5)
    database = await open_tenant_database(None, tmp_path)
    gate = LimitGate(StoreCounters(database))
    try:
        _key, one = await KeyStore(database).create("one-at-a-time", KeyLimits(max_concurrent=1))
        await gate.admit(one, "m", 1)  # never settled
        for _ in range(4):  # renewed while younger than LEASE_MAX_SECONDS, then no more
            await asyncio.sleep(0.5)
            await gate.renew_leases()
        await gate.admit(one, "m", 1)  # its place expired a LEASE_SECONDS after its last renewal
    finally:
        await database.close()


async def test_redis_counters_keep_every_key_under_their_prefix(tmp_path):
    """Deployments (and test runs) that share one Redis database count apart: a key's counters live
    under `PREFIX:tenants:{key id}:`, never under the default prefix."""
    database = await open_tenant_database(None, tmp_path)
    with scratch_redis() as place:
        counters = place.counters()
        try:
            gate = LimitGate(counters, clock=lambda: MID_MINUTE)
            _key, record = await KeyStore(database).create("prefixed", KeyLimits(rpm=5, max_concurrent=2))
            admission = await gate.admit(record, "m", 10)
            await gate.settle(admission, 10, 0.5)
            async with aioredis.Redis.from_url(place.url, decode_responses=True) as client:
                written = [key async for key in client.scan_iter(match=f"{place.prefix}:*")]
                by_default = [key async for key in client.scan_iter(match=f"q2api:tenants:{{{record.id}}}:*")]
            assert written and all(key.startswith(f"{place.prefix}:tenants:{{{record.id}}}:") for key in written)
            assert by_default == []
        finally:
            await counters.close()
            await database.close()
