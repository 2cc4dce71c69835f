"""The store contract: the one store behaves alike on SQLite, PostgreSQL and MySQL (MariaDB).

Every test runs three times, once per store; `await open_store()` opens another
handle on the same store, as another worker or replica would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable

import pytest
import sqlalchemy as sa

from q2api.accounts import store_schema
from q2api.accounts.opening import open_account_store
from q2api.accounts.records import (
    ENV_ACCOUNT_ID,
    Account,
    AccountRest,
    AccountStatus,
    EnvAccount,
    LoginStatus,
    StatsDelta,
)
from q2api.accounts.store import SqlAccountStore
from q2api.accounts.store_protocol import AccountStore
from q2api.accounts.store_schema import STORE_MIGRATIONS
from q2api.store.migrations import (
    Migration,
    MigrationChain,
    SchemaTooNew,
    add_column,
    bookkeeping_table,
)
from tests.support.stores import STORE_KINDS, OpenStore, store_opener


@pytest.fixture(params=STORE_KINDS)
async def open_store(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[OpenStore]:
    async with store_opener(request.param, tmp_path) as opener:
        yield opener


@pytest.fixture
async def store(open_store: OpenStore) -> AccountStore:
    return await open_store()


async def add_idc(store: AccountStore, label: str = "work", **extra: object) -> Account:
    return await store.add(
        auth_method="idc",
        refresh_token=f"refresh-SECRET-{label}",
        client_id="client-id-1",
        client_secret="client-SECRET-1",
        label=label,
        **extra,  # type: ignore[arg-type]
    )


def env_account(refresh_token: str = "env-refresh-SECRET-1", client_secret: str = "client-SECRET") -> EnvAccount:
    return EnvAccount(auth_method="idc", refresh_token=refresh_token, client_id="cid", client_secret=client_secret)


async def test_an_added_account_reads_back_whole(store: AccountStore) -> None:
    added = await add_idc(store, region="eu-west-1", access_token="access-1", expires_at=2e9, profile_arn="arn:p")
    again = await store.get(added.id)
    assert again is not None
    assert (again.refresh_token, again.client_secret, again.access_token) == (
        "refresh-SECRET-work",
        "client-SECRET-1",
        "access-1",
    )
    assert (again.label, again.auth_method, again.region, again.profile_arn) == ("work", "idc", "eu-west-1", "arn:p")
    assert again.enabled and again.status is AccountStatus.ACTIVE and again.expires_at == 2e9
    assert [account.id for account in await store.accounts()] == [added.id]
    assert "SECRET" not in repr(await store.list_views())


async def test_a_kiro_api_key_account_with_a_proxy_reads_back_whole_and_shows_no_secret(store: AccountStore) -> None:
    proxy = "socks5://me:proxy-SECRET@10.0.0.9:1080"
    added = await store.add(
        auth_method="api_key", refresh_token=None, access_token="ksk_SECRET-key", label="ci", proxy_url=proxy
    )
    again = await store.get(added.id)
    assert again is not None
    assert (again.auth_method, again.refresh_token, again.access_token, again.expires_at) == (
        "api_key",
        None,
        "ksk_SECRET-key",
        None,
    )
    assert again.proxy_url == proxy
    [view] = await store.list_views()
    assert view.proxy == "socks5://me:…@10.0.0.9:1080" and view.auth_method == "api_key"
    assert "SECRET" not in repr(view)


async def test_the_environment_account_follows_its_proxy(store: AccountStore) -> None:
    seeded = await store.seed_from_env(
        EnvAccount(auth_method="api_key", refresh_token=None, access_token="ksk_env", proxy_url="http://a:1")
    )
    assert (seeded.auth_method, seeded.access_token, seeded.proxy_url) == ("api_key", "ksk_env", "http://a:1")
    moved = await store.seed_from_env(
        EnvAccount(auth_method="api_key", refresh_token=None, access_token="ksk_env", proxy_url="socks5://b:2")
    )
    assert moved.proxy_url == "socks5://b:2" and moved.access_token == "ksk_env"
    dropped = await store.seed_from_env(EnvAccount(auth_method="api_key", refresh_token=None, access_token="ksk_env"))
    assert dropped.proxy_url is None


async def test_adding_under_a_known_id_replaces_credentials_but_keeps_the_operators_switch(store: AccountStore) -> None:
    first = await add_idc(store)
    await store.update(first.id, enabled=False)
    await store.set_status(first.id, AccountStatus.NEEDS_LOGIN, "refresh token rejected")
    replaced = await store.add(auth_method="social", refresh_token="new-SECRET", label="work", account_id=first.id)
    assert replaced.refresh_token == "new-SECRET" and replaced.auth_method == "social"
    assert replaced.status is AccountStatus.ACTIVE and replaced.status_detail is None
    assert not replaced.enabled
    assert replaced.token_generation > first.token_generation
    assert len(await store.accounts()) == 1


async def test_every_account_change_moves_the_generation_for_every_handle(open_store: OpenStore) -> None:
    store, other = await open_store(), await open_store()
    seen = [await other.generation()]

    async def changed() -> bool:
        seen.append(await other.generation())
        return seen[-1] != seen[-2]

    account = await add_idc(store)
    assert await changed()
    await store.update(account.id, label="renamed")
    assert await changed()
    await store.save_tokens(account.id, access_token="a2", expires_at=2e9)
    assert await changed()
    await store.set_status(account.id, AccountStatus.NEEDS_LOGIN, "x")
    assert await changed()
    await store.add_stats({account.id: StatsDelta(requests=1)})
    assert not await changed()  # counting requests is not an account change
    assert await store.remove(account.id)
    assert await changed()
    assert not await store.remove(account.id)
    assert await store.update("no-such-id", enabled=False) is None


async def test_saved_tokens_rotate_only_what_the_refresh_returned(store: AccountStore) -> None:
    account = await add_idc(store, profile_arn="arn:old")
    await store.set_status(account.id, AccountStatus.NEEDS_LOGIN, "rejected")
    kept = await store.save_tokens(account.id, access_token="access-2", expires_at=123.0)
    assert kept is not None and kept.refresh_token == "refresh-SECRET-work" and kept.profile_arn == "arn:old"
    assert kept.status is AccountStatus.ACTIVE and kept.refreshed_at is not None
    rotated = await store.save_tokens(
        account.id, access_token="access-3", expires_at=456.0, refresh_token="rotated-SECRET", profile_arn="arn:new"
    )
    assert rotated is not None
    assert (rotated.access_token, rotated.refresh_token, rotated.profile_arn) == (
        "access-3",
        "rotated-SECRET",
        "arn:new",
    )
    assert rotated.token_generation > kept.token_generation
    late = await store.save_tokens(account.id, access_token="late", expires_at=1.0, if_generation=kept.token_generation)
    assert late is None  # a newer write happened meanwhile: the late one is dropped
    assert (await store.get(account.id)).access_token == "access-3"
    assert await store.save_tokens("no-such-id", access_token="x", expires_at=1.0) is None


async def test_the_environment_seed_keeps_a_rotated_token_until_the_env_token_changes(open_store: OpenStore) -> None:
    store = await open_store()
    created = await store.seed_from_env(env_account())
    assert created.id == ENV_ACCOUNT_ID and created.refresh_token == "env-refresh-SECRET-1"
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="a", expires_at=2e9, refresh_token="rotated-SECRET")

    restarted = await (await open_store()).seed_from_env(env_account(client_secret="client-SECRET-2"))
    assert restarted.refresh_token == "rotated-SECRET"  # the same env token: the rotated one wins
    assert restarted.client_secret == "client-SECRET-2"  # the client registration follows the environment

    relogged = await (await open_store()).seed_from_env(env_account("env-refresh-SECRET-NEW"))
    assert relogged.refresh_token == "env-refresh-SECRET-NEW" and relogged.access_token is None
    assert len(await store.accounts()) == 1


async def test_stats_from_several_workers_add_up(open_store: OpenStore) -> None:
    store, other = await open_store(), await open_store()
    account = await add_idc(store)
    await store.add_stats({account.id: StatsDelta(requests=3, failures=1, last_error="throttled", last_used_at=100.0)})
    await other.add_stats(
        {account.id: StatsDelta(requests=2, last_used_at=50.0), "removed-account": StatsDelta(requests=9)}
    )
    stats = await store.read_stats()
    assert set(stats) == {account.id}
    assert (stats[account.id].requests, stats[account.id].failures) == (5, 1)
    assert stats[account.id].last_error == "throttled" and stats[account.id].last_used_at == 100.0
    await store.remove(account.id)
    assert await store.read_stats() == {}


async def test_the_longest_cool_down_wins_and_a_spent_one_is_gone(open_store: OpenStore) -> None:
    store, other = await open_store(), await open_store()
    now = time.time()
    await store.add_rests({"a": AccountRest(now + 60, "throttled"), "b": AccountRest(now - 1, "throttled")})
    await other.add_rests({"a": AccountRest(now + 30, "failing")})
    assert await other.read_rests() == {"a": AccountRest(now + 60, "throttled")}
    await other.add_rests({"a": AccountRest(now + 3600, "quota_exhausted")})
    assert (await store.read_rests())["a"].reason == "quota_exhausted"
    await other.clear_rests(["a", "never-rested"])  # the upstream served it again somewhere
    assert await store.read_rests() == {}


async def test_login_records_are_visible_to_every_handle(open_store: OpenStore) -> None:
    store, other = await open_store(), await open_store()
    await store.record_login("login_1", "work", "builder-id", expires_in=600)
    await store.record_login("login_2", "late", "idc", expires_in=-1)
    pending = await other.read_login("login_1")
    assert pending is not None and pending.status is LoginStatus.PENDING and pending.label == "work"
    await other.finish_login("login_1", LoginStatus.DONE, account_id="acc1")
    done = await store.read_login("login_1")
    assert done is not None and (done.status, done.account_id) == (LoginStatus.DONE, "acc1")
    expired = await store.read_login("login_2")
    assert expired is not None and expired.status is LoginStatus.EXPIRED
    assert await store.read_login("login_missing") is None


async def test_only_a_pending_login_is_cancelled(open_store: OpenStore) -> None:
    store, other = await open_store(), await open_store()
    await store.record_login("waiting", "work", "builder-id", expires_in=600)
    await store.record_login("approved", "home", "builder-id", expires_in=600)
    await other.finish_login("approved", LoginStatus.DONE, account_id="acc1")  # it ended before the cancel
    assert await other.cancel_login("waiting", "by the operator") is True
    assert await other.cancel_login("approved", "by the operator") is False
    assert await other.cancel_login("waiting", "twice") is False
    assert await other.cancel_login("login_missing", "never was") is False
    waiting, approved = await store.read_login("waiting"), await store.read_login("approved")
    assert waiting is not None and (waiting.status, waiting.detail) == (LoginStatus.CANCELLED, "by the operator")
    assert approved is not None and (approved.status, approved.account_id) == (LoginStatus.DONE, "acc1")


async def test_an_imported_account_is_an_exact_copy(open_store: OpenStore, tmp_path) -> None:
    source = await open_account_store(None, tmp_path / "source", None)
    original = await add_idc(source, region="us-west-2", access_token="acc", expires_at=1e9)
    await source.update(original.id, enabled=False)
    await source.set_status(original.id, AccountStatus.NEEDS_LOGIN, "suspended")
    copied_from = await source.get(original.id)
    assert copied_from is not None
    store = await open_store()
    await store.import_account(copied_from)
    await store.import_account(copied_from)  # twice: replaces, never duplicates
    assert await store.accounts() == [copied_from]


async def test_an_account_copied_over_the_environment_account_survives_a_restart(
    open_store: OpenStore, tmp_path
) -> None:
    store = await open_store()
    await store.seed_from_env(env_account())
    source = await open_account_store(None, tmp_path / "source", None)
    await source.seed_from_env(env_account())
    await source.save_tokens(ENV_ACCOUNT_ID, access_token="a", expires_at=2e9, refresh_token="rotated-SECRET")
    copied = await source.get(ENV_ACCOUNT_ID)
    assert copied is not None
    await store.import_account(copied)  # `q2api accounts copy --replace`
    restarted = await (await open_store()).seed_from_env(env_account())  # the same env token
    assert restarted.refresh_token == "rotated-SECRET"  # the copied, newest token, not the retired env one


async def test_the_refresh_lock_has_one_holder_across_handles(open_store: OpenStore) -> None:
    first, second = await open_store(), await open_store()
    order: list[str] = []

    async def hold(store: AccountStore, name: str) -> None:
        async with store.refresh_lock("acc-1"):
            order.append(f"{name} in")
            await asyncio.sleep(0.3)
            order.append(f"{name} out")

    async with asyncio.timeout(20):
        await asyncio.gather(hold(first, "first"), hold(second, "second"))
    assert order in (
        ["first in", "first out", "second in", "second out"],
        ["second in", "second out", "first in", "first out"],
    )
    async with asyncio.timeout(20):  # another account's lock is another lock
        async with first.refresh_lock("acc-1"), second.refresh_lock("acc-2"):
            pass


async def test_a_write_whose_caller_is_cancelled_still_commits(open_store: OpenStore) -> None:
    # A client that hangs up, or a shutdown, must not lose a rotated refresh token half-written.
    store = await open_store()
    account = await store.add(auth_method="social", refresh_token="refresh-SECRET-1", label="work")
    saving = asyncio.create_task(
        store.save_tokens(account.id, access_token="a2", expires_at=2e9, refresh_token="rotated-SECRET")
    )
    await asyncio.sleep(0)  # the write has begun
    saving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await saving
    await store.close()  # waits for the running write
    stored = await (await open_store()).get(account.id)
    assert stored is not None and stored.refresh_token == "rotated-SECRET"


async def test_a_store_migrated_by_a_newer_q2api_is_refused(open_store: OpenStore) -> None:
    store = await open_store()
    assert isinstance(store, SqlAccountStore)
    future = sa.insert(STORE_MIGRATIONS.bookkeeping).values(version=999, description="future", applied_at=0.0)
    await store.database.write(lambda db: db.execute(future))
    with pytest.raises(SchemaTooNew, match="999"):
        await open_store()


# A module with tables of its own (client keys, a usage ledger…) brings its own chain.
other_metadata = sa.MetaData()
keys = sa.Table(
    "q2api_test_keys",
    other_metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("label", sa.String(255), nullable=False),
    sa.Column("rpm", sa.Integer, nullable=False, server_default="60"),
)
FIRST_KEYS_CHAIN = MigrationChain(
    "test_keys",
    bookkeeping_table("q2api_test_keys_schema_migrations", other_metadata),
    (
        Migration(
            1,
            "keys",
            lambda db: db.execute(
                sa.text("CREATE TABLE q2api_test_keys (id VARCHAR(64) PRIMARY KEY, label VARCHAR(255) NOT NULL)")
            ),
        ),
    ),
)
KEYS_CHAIN = MigrationChain(
    "test_keys",
    FIRST_KEYS_CHAIN.bookkeeping,
    (*FIRST_KEYS_CHAIN.steps, Migration(2, "a rate limit per key", add_column(keys, "rpm"))),
)


async def test_another_modules_chain_migrates_beside_the_stores_own(open_store: OpenStore) -> None:
    store = await open_store(chains=[STORE_MIGRATIONS, FIRST_KEYS_CHAIN])
    assert isinstance(store, SqlAccountStore)
    db = store.database
    await db.write(lambda connection: connection.execute(sa.text("INSERT INTO q2api_test_keys VALUES ('k1', 'old')")))
    store = await open_store(chains=[STORE_MIGRATIONS, KEYS_CHAIN])  # a release with the chain's next step
    assert isinstance(store, SqlAccountStore)
    db = store.database
    await db.write(lambda connection: connection.execute(sa.insert(keys).values(id="k2", label="new", rpm=5)))
    rows = await db.read(lambda connection: connection.execute(sa.select(keys).order_by(keys.c.id)).all())
    assert [tuple(row) for row in rows] == [("k1", "old", 60), ("k2", "new", 5)]  # the old row got the default

    def versions(chain: MigrationChain) -> Callable[[sa.Connection], list[int]]:
        return lambda connection: sorted(connection.scalars(sa.select(chain.bookkeeping.c.version)))

    assert await db.read(versions(KEYS_CHAIN)) == [1, 2]
    assert await db.read(versions(STORE_MIGRATIONS)) == [step.version for step in STORE_MIGRATIONS.steps]
    with pytest.raises(SchemaTooNew, match="test_keys schema is at version 2"):
        await open_store(chains=[STORE_MIGRATIONS, FIRST_KEYS_CHAIN])  # the release before refuses it
    assert [account.id for account in await (await open_store()).accounts()] == []  # a store without the module


def test_stores_opening_together_migrate_once(open_store: OpenStore) -> None:
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def start_worker() -> None:  # a thread and an event loop each, as separate processes would have
        start.wait()
        try:
            asyncio.run(open_and_close(open_store))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start_worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []

    async def versions_and_generations() -> tuple[list[int], int]:
        store = await open_store()
        assert isinstance(store, SqlAccountStore)
        versions = await store.database.read(
            lambda db: sorted(db.scalars(sa.select(STORE_MIGRATIONS.bookkeeping.c.version)))
        )
        generations = await store.database.read(lambda db: len(db.execute(sa.select(store_schema.meta)).all()))
        await store.close()
        return versions, generations

    versions, generation_rows = asyncio.run(versions_and_generations())
    assert versions == [step.version for step in STORE_MIGRATIONS.steps]
    assert generation_rows == 1  # the generation row, seeded once


async def open_and_close(open_store: OpenStore) -> None:
    store = await open_store()
    await store.close()
