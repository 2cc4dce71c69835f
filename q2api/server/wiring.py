"""Settings → the arguments the protocol packages take (they never read settings themselves)."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from q2api import __version__
from q2api.accounts.discovery import AccountDiscovery
from q2api.accounts.pool import AccountPool
from q2api.accounts.records import EnvAccount
from q2api.accounts.refresh import RefreshEndpoints
from q2api.amazonq.account_access import Credential
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import API_KEY_AUTH
from q2api.amazonq.catalogue import Catalogue
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.host_rests import FleetRests, HostRests
from q2api.amazonq.hosts import first_host, parse_override
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver
from q2api.amazonq.profiles import profile_hosts
from q2api.amazonq.service_api import ServiceApis
from q2api.amazonq.upstream import DEFAULT_KEEPALIVE_SECONDS, UpstreamConfig, create_session
from q2api.amazonq.web_search import WebSearchClient
from q2api.conversion.loop_guard import LoopPolicy
from q2api.conversion.trimming import TrimPolicy
from q2api.models.resolution import UnknownModelPolicy
from q2api.models.routing import ModelRouter
from q2api.models.table import builtin_catalogue
from q2api.settings import Settings


def upstream_session(keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS) -> aiohttp.ClientSession:
    """The HTTP session every call to Amazon Q and its token services goes through (inside a running loop)."""
    return create_session(user_agent=f"q2api/{__version__}", keepalive_seconds=keepalive_seconds)


def host_choice(
    settings: Settings, *, observer: UpstreamObserver = NO_OBSERVER, fleet: FleetRests | None = None
) -> HostChoice:
    """Each account's hosts and what failed lately: one for the chat, the catalogue, credits and web search;
    with `fleet`, what failed lately for any worker or replica."""
    return HostChoice(settings.endpoint, observer=observer, rests=HostRests(fleet=fleet))


def env_account(settings: Settings) -> EnvAccount | None:
    """The account the AMAZONQ_* variables describe, if any."""
    if not settings.has_env_account:
        return None
    return EnvAccount(
        auth_method=settings.auth_method,
        refresh_token=settings.refresh_token,
        # A Kiro API key is the account's bearer token itself (never refreshed).
        access_token=settings.amazonq_api_key or settings.access_token,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        profile_arn=settings.profile_arn,
        proxy_url=settings.proxy_url,
    )


def refresh_endpoints(settings: Settings) -> RefreshEndpoints:
    """The token services, and where an IdC login's profile is looked up after each refresh."""
    return RefreshEndpoints(
        oidc=settings.oidc_endpoint,
        kiro=settings.kiro_refresh_endpoint,
        profile_hosts=profile_hosts([host.url for host in parse_override(settings.endpoint)]),
    )


def api_key_check_url(settings: Settings, region: str | None) -> str:
    """Where a new Kiro API key is checked: the first host an API-key account of `region` calls."""
    return first_host(API_KEY_AUTH, region, False, parse_override(settings.endpoint)).url


def upstream_config(settings: Settings) -> UpstreamConfig:
    return UpstreamConfig(
        endpoint=settings.endpoint,
        connect_timeout=settings.connect_timeout,
        first_byte_timeout=settings.first_byte_timeout,
        read_timeout=settings.read_timeout,
        max_retries=settings.max_retries,
        max_request_bytes=settings.upstream_max_request_bytes,
        account_max_inflight=settings.account_max_inflight,
        inflight_wait=settings.account_inflight_wait_seconds,
    )


def web_searcher(
    session: aiohttp.ClientSession,
    pool: AccountPool,
    hosts: HostChoice,
    settings: Settings,
    proxies: AccountProxies | None = None,
) -> WebSearchClient:
    """Web searches through Kiro's MCP endpoint on the account that serves each reply, on the host its
    chat goes to (A11: `/mcp` lives on the inference hosts), through the account's own proxy if it has one."""

    def host_of(credential: Credential) -> str:
        return hosts.preferred(credential).url

    return WebSearchClient(session, pool, host_of, timeout=settings.connect_timeout + 20.0, proxies=proxies)


def loop_policy(settings: Settings) -> LoopPolicy:
    return LoopPolicy(
        mode=settings.loop_mode,
        repetitions=settings.loop_threshold,
        storm_calls=settings.loop_storm_threshold,
    )


def trim_policy(settings: Settings) -> TrimPolicy:
    return TrimPolicy(mode=settings.trim_history)


def account_discovery(
    settings: Settings,
    pool: AccountPool,
    session: aiohttp.ClientSession,
    *,
    hosts: HostChoice | None = None,
    observer: UpstreamObserver = NO_OBSERVER,
    proxies: AccountProxies | None = None,
) -> AccountDiscovery:
    """Each account's catalogue and credits, read from the host its chat goes to (through its own proxy)."""
    return AccountDiscovery(
        pool,
        ServiceApis(session, hosts or host_choice(settings), timeout=settings.connect_timeout + 10.0, proxies=proxies),
        fallback=builtin_catalogue(),
        catalogue_interval=settings.models_refresh_seconds,
        credits_max_age=settings.credits_refresh_seconds,
        live=settings.model_discovery,
        observer=observer,
    )


def model_router(
    settings: Settings, catalogue: Callable[[], Catalogue], *, on_unknown: Callable[[], None] | None = None
) -> ModelRouter:
    return ModelRouter(
        catalogue,
        aliases=settings.model_map,
        policy=UnknownModelPolicy(settings.unknown_model),
        default_model=settings.default_model,
        on_unknown=on_unknown,
    )
