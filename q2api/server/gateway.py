"""The gateway's long-lived parts, built in the app's lifespan and kept in one typed container.

One HTTP session, one account store, the pool of accounts serving from it (and the reloader that
keeps the pool in step with the store), each account's catalogue and credits, the model router,
the relay every front door runs on, and the activity ring. Routes reach the container through
their request (`gateway_of`), so nothing of it lives at module level.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from starlette.requests import HTTPConnection

from q2api.accounts.discovery import AccountDiscovery
from q2api.accounts.opening import open_account_store, response_store_for
from q2api.accounts.pool import AccountPool, build_account_pool
from q2api.accounts.records import Account
from q2api.accounts.refresh import RefreshEndpoints
from q2api.accounts.reload import AccountReloader
from q2api.accounts.response_store import ResponseStore
from q2api.accounts.store_protocol import AccountStore
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.upstream import UpstreamClient
from q2api.models.routing import ModelRouter
from q2api.server import metrics
from q2api.server.activity import ActivityLog
from q2api.server.allocator import returning_idle_memory
from q2api.server.captures.recorder import Captures
from q2api.server.edge import ClientKeys
from q2api.server.exchange_log import Exchange
from q2api.server.readiness import log_readiness, log_store_contents
from q2api.server.relay import MessagesRelay
from q2api.server.tenancy import KeyDirectory, Tenancy
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
from q2api.tenants.counters import Counters, StoreCounters
from q2api.tenants.database import open_tenant_database
from q2api.tenants.gate import LimitGate
from q2api.tenants.keys import KeyStore
from q2api.tenants.ledger import UsageLedger

STATE_KEY = "gateway"  # its name in the lifespan state every request's scope carries


@dataclasses.dataclass(frozen=True, slots=True)
class Gateway:
    settings: Settings
    session: aiohttp.ClientSession  # every call to Amazon Q and its token services
    proxies: AccountProxies  # the sessions of accounts that have a proxy of their own
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
        store = await open_account_store(settings.database_url, settings.data_dir, settings.secret_key)
        stack.push_async_callback(store.close)
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
        hosts = host_choice(settings, observer=metrics.UPSTREAM_OBSERVER)
        discovery = account_discovery(
            settings, pool, session, hosts=hosts, observer=metrics.UPSTREAM_OBSERVER, proxies=proxies
        )
        models = model_router(settings, discovery.catalogue, on_unknown=discovery.request_refresh)
        tenancy = await stack.enter_async_context(opened_tenancy(settings))
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
            ),
            settings=settings,
            models=models,
            on_exchange_logged=_after_each_request(discovery, activity if settings.admin_key else None, tenancy),
            captures=captures,
            searcher=web_searcher(session, pool, hosts, settings, proxies),
            tenancy=tenancy,
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
            store=store,
            responses=response_store_for(store),
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
async def opened_tenancy(settings: Settings) -> AsyncIterator[Tenancy]:
    """The client keys (environment and store), their limits' counters (Redis, else the store) and the
    usage ledger, for the length of a block; the ledger's last rows are written at its end."""
    database = await open_tenant_database(settings.database_url, settings.data_dir)
    try:
        counters: Counters
        if settings.redis_url:
            from q2api.tenants.redis_counters import RedisCounters  # redis is imported only when used

            counters = RedisCounters(settings.redis_url)
        else:
            counters = StoreCounters(database)
        ledger = UsageLedger(
            database, retention_days=settings.usage_retention_days, on_lost=metrics.count_lost_usage_rows
        )
        ledger.start()
        tenancy = Tenancy(
            ClientKeys(list(settings.api_keys)), KeyDirectory(KeyStore(database)), LimitGate(counters), ledger
        )
        try:
            yield tenancy
        finally:
            await tenancy.close()
    finally:
        await database.close()


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
