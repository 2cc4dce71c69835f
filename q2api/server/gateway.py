"""The gateway's long-lived parts, built in the app's lifespan and kept in one typed container.

One HTTP session, one database (the store's: one engine per process, which the accounts, the stored
responses, the client keys, their counters and the usage ledger share), the account store on it, the pool of accounts serving from it (and the reloader that
keeps the pool in step with the store), each account's catalogue and credits, the model router,
the relay every front door runs on, and the activity ring. Routes reach the container through
their request (`gateway_of`), so nothing of it lives at module level.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from loguru import logger
from starlette.requests import HTTPConnection

from q2api.accounts.discovery import AccountDiscovery
from q2api.accounts.opening import account_store_on
from q2api.accounts.pool import AccountPool, build_account_pool
from q2api.accounts.records import Account
from q2api.accounts.refresh import RefreshEndpoints
from q2api.accounts.reload import AccountReloader
from q2api.accounts.session_affinity import SessionAffinity
from q2api.accounts.session_pins import SESSION_PIN_MIGRATIONS, SessionPins, StoreSessionPins
from q2api.accounts.store import DEFAULT_CHAINS
from q2api.accounts.store_protocol import AccountStore
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.upstream import UpstreamClient
from q2api.fleet.limits import fleet_limits
from q2api.fleet.tables import FLEET_MIGRATIONS
from q2api.models.routing import ModelRouter
from q2api.server import metrics
from q2api.server.activity import ActivityLog
from q2api.server.allocator import returning_idle_memory
from q2api.server.captures.recorder import Captures
from q2api.server.edge import ClientKeys
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.lifecycle.relay import MessagesRelay
from q2api.server.lifecycle.tenancy import KeyDirectory, Tenancy
from q2api.server.readiness import log_readiness, log_store_contents
from q2api.server.wiring import (
    account_discovery,
    env_account,
    host_choice,
    model_router,
    refresh_endpoints,
    upstream_config,
    upstream_session,
    web_searcher,
)
from q2api.settings import Settings
from q2api.store.database import StoreDatabase
from q2api.store.migrations import MigrationChain
from q2api.store.opening import open_database
from q2api.stored_responses.sql_store import SqlResponseStore
from q2api.stored_responses.store import ResponseStore
from q2api.tenants.counters import Counters, StoreCounters
from q2api.tenants.gate import LimitGate
from q2api.tenants.keys import KeyStore
from q2api.tenants.ledger import UsageLedger
from q2api.tenants.ledger_journal import LedgerJournal
from q2api.tenants.tables import TENANT_MIGRATIONS

STATE_KEY = "gateway"  # its name in the lifespan state every request's scope carries
# Every chain of migrations of the tables the gateway keeps in its database, run when it opens it.
STORE_CHAINS: tuple[MigrationChain, ...] = (
    *DEFAULT_CHAINS,
    TENANT_MIGRATIONS,
    FLEET_MIGRATIONS,
    SESSION_PIN_MIGRATIONS,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Gateway:
    settings: Settings
    session: aiohttp.ClientSession  # every call to Amazon Q and its token services
    proxies: AccountProxies  # the sessions of accounts that have a proxy of their own
    database: StoreDatabase  # the one engine on the store's database, which every store below shares
    store: AccountStore
    responses: ResponseStore  # stored Responses API conversations, beside the accounts
    pool: AccountPool
    reloader: AccountReloader  # follows the store's account changes, whichever process made them
    endpoints: RefreshEndpoints
    discovery: AccountDiscovery  # each account's catalogue and credits
    models: ModelRouter
    relay: MessagesRelay
    activity: ActivityLog  # the last requests this worker served
    captures: Captures  # capture files of failed requests (Q2API_CAPTURE)
    tenancy: Tenancy  # client keys (environment and store), their limits, the usage ledger

    async def account_usage(self, account: Account) -> dict[str, Any] | None:
        """An account's credits as the admin API shows them; None for an account outside the pool (disabled)."""
        try:
            return await self.discovery.account_usage(account.id)
        except KeyError:
            return None


@contextlib.asynccontextmanager
async def open_gateway(settings: Settings) -> AsyncIterator[Gateway]:
    """Build the gateway, serve while the block runs, and close every part in reverse order."""
    async with contextlib.AsyncExitStack() as stack:
        session = await stack.enter_async_context(upstream_session(settings.upstream_keepalive_seconds))
        proxies = AccountProxies(session, keepalive_seconds=settings.upstream_keepalive_seconds)
        stack.push_async_callback(proxies.close)
        database = await open_database(settings.database_url, settings.data_dir, STORE_CHAINS)
        stack.push_async_callback(database.close)  # the account store's close would be the same
        store = account_store_on(database, settings.secret_key)
        endpoints = refresh_endpoints(settings)
        pool = await build_account_pool(
            store,
            session,
            endpoints=endpoints,
            seed=env_account(settings),
            failure_limit=settings.account_max_failures,
            observer=metrics.UPSTREAM_OBSERVER,
            proxies=proxies,
        )
        await log_store_contents(store)
        reloader = AccountReloader(store, pool)
        reloader.start()
        stack.push_async_callback(reloader.stop)
        # The accounts' in-flight cap and host rests, held across every worker and replica.
        fleet = fleet_limits(
            database, settings.redis_url, settings.redis_prefix, on_unshared=metrics.count_unshared_slot
        )
        fleet.start()
        stack.push_async_callback(fleet.close)
        hosts = host_choice(settings, observer=metrics.UPSTREAM_OBSERVER, fleet=fleet)
        discovery = account_discovery(
            settings, pool, session, hosts=hosts, observer=metrics.UPSTREAM_OBSERVER, proxies=proxies
        )
        models = model_router(settings, discovery.catalogue, on_unknown=discovery.request_refresh)
        tenancy = await stack.enter_async_context(opened_tenancy(settings, database))
        affinity = session_affinity(settings, database)
        if affinity is not None:
            stack.push_async_callback(affinity.close)
        activity = ActivityLog()
        captures = Captures(settings)
        stack.push_async_callback(captures.drain)  # captures being written are finished before the exit
        relay = MessagesRelay(
            upstream=UpstreamClient(
                session,
                pool,
                upstream_config(settings),
                observer=metrics.UPSTREAM_OBSERVER,
                hosts=hosts,
                proxies=proxies,
                fleet=fleet,
            ),
            settings=settings,
            models=models,
            on_exchange_logged=_after_each_request(discovery, activity if settings.admin_key else None, tenancy),
            captures=captures,
            searcher=web_searcher(session, pool, hosts, settings, proxies),
            tenancy=tenancy,
            affinity=affinity,
        )
        # Large bodies' freed memory reused while requests come, given back when they stop.
        await stack.enter_async_context(returning_idle_memory(lambda: relay.requests_received))
        await discovery.start()
        stack.push_async_callback(discovery.stop)
        await log_readiness(store, pool, settings.endpoint)
        yield Gateway(
            settings=settings,
            session=session,
            proxies=proxies,
            database=database,
            store=store,
            responses=SqlResponseStore(database),
            pool=pool,
            reloader=reloader,
            endpoints=endpoints,
            discovery=discovery,
            models=models,
            relay=relay,
            activity=activity,
            captures=captures,
            tenancy=tenancy,
        )


@contextlib.asynccontextmanager
async def opened_tenancy(settings: Settings, database: StoreDatabase) -> AsyncIterator[Tenancy]:
    """The client keys (environment and store), their limits' counters (Redis, else the store) and the
    usage ledger on `database` (migrated with TENANT_MIGRATIONS), for the length of a block; the
    ledger's last rows are written at its end. The database stays open: it is the caller's."""
    counters: Counters
    if settings.redis_url:
        from q2api.tenants.redis_counters import RedisCounters  # redis is imported only when used

        counters = RedisCounters(settings.redis_url, settings.redis_prefix)
    else:
        counters = StoreCounters(database)
    ledger = UsageLedger(
        database,
        retention_days=settings.usage_retention_days,
        journal=_ledger_journal(Path(settings.data_dir)),
        on_lost=metrics.count_lost_usage_rows,
        on_waiting=metrics.set_waiting_usage_rows,
    )
    ledger.start()
    gate = LimitGate(counters, when_down=settings.limits_when_store_down, observer=metrics.KEY_LIMITS_OBSERVER)
    gate.start()
    tenancy = Tenancy(ClientKeys(list(settings.api_keys)), KeyDirectory(KeyStore(database)), gate, ledger)
    try:
        yield tenancy
    finally:
        await tenancy.close()


def session_affinity(settings: Settings, database: StoreDatabase) -> SessionAffinity | None:
    """Conversations pinned to their account, in Redis when there is one, else in `database`; None when
    `Q2API_SESSION_AFFINITY_SECONDS` is 0."""
    idle = settings.session_affinity_seconds
    if not idle:
        return None
    pins: SessionPins
    if settings.redis_url:
        from q2api.accounts.redis_session_pins import RedisSessionPins  # redis is imported only when used

        pins = RedisSessionPins(settings.redis_url, idle, settings.redis_prefix)
    else:
        pins = StoreSessionPins(database, idle)
    return SessionAffinity(pins, metrics.AFFINITY_OBSERVER)


def _ledger_journal(data_dir: Path) -> LedgerJournal | None:
    """Where usage rows wait until the database has them, safe from a crash (None: in memory alone)."""
    try:
        return LedgerJournal(data_dir)
    except OSError as exc:
        logger.warning(
            f"the usage ledger's journal cannot be kept in {data_dir} ({type(exc).__name__}: {exc}): rows wait "
            "in memory alone, and a crash loses those not yet written"
        )
        return None


def _after_each_request(
    discovery: AccountDiscovery, activity: ActivityLog | None, tenancy: Tenancy
) -> Callable[[Exchange], None]:
    """What happens once a request's log line is written: its metered credits move its account's
    known figure, the admin API's activity ring (when there is an admin API) keeps it, and its
    client key and the usage ledger count it."""

    def logged(exchange: Exchange) -> None:
        tenancy.finished(exchange, exchange.admission)
        if exchange.credits_metered and exchange.account_id is not None:
            discovery.note_metered(exchange.account_id, exchange.credits)
        if activity is not None:
            activity.record(exchange)

    return logged


def gateway_of(request: HTTPConnection) -> Gateway:
    """The container of the app serving `request` (the lifespan put it in every request's state)."""
    gateway = getattr(request.state, STATE_KEY, None)
    if not isinstance(gateway, Gateway):  # a route called outside the lifespan: a bug, not a client error
        raise RuntimeError("the gateway is not running (the app's lifespan has not started it)")
    return gateway
