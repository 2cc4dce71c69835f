"""Settings → the arguments the protocol packages take (they never read settings themselves)."""

from __future__ import annotations

from q2api.amazonq.accounts.records import EnvAccount
from q2api.amazonq.accounts.refresh import RefreshEndpoints
from q2api.amazonq.upstream import UpstreamConfig
from q2api.conversion.loop_guard import LoopPolicy
from q2api.settings import Settings


def env_account(settings: Settings) -> EnvAccount | None:
    """The account the AMAZONQ_* variables describe, if any."""
    if not settings.has_env_account:
        return None
    return EnvAccount(
        auth_method=settings.auth_method,
        refresh_token=settings.refresh_token,
        access_token=settings.access_token,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        profile_arn=settings.profile_arn,
    )


def refresh_endpoints(settings: Settings) -> RefreshEndpoints:
    return RefreshEndpoints(oidc=settings.oidc_endpoint, kiro=settings.kiro_refresh_endpoint)


def upstream_config(settings: Settings) -> UpstreamConfig:
    return UpstreamConfig(
        endpoint=settings.endpoint,
        connect_timeout=settings.connect_timeout,
        first_byte_timeout=settings.first_byte_timeout,
        read_timeout=settings.read_timeout,
        max_retries=settings.max_retries,
    )


def loop_policy(settings: Settings) -> LoopPolicy:
    return LoopPolicy(
        mode=settings.loop_mode,
        repetitions=settings.loop_threshold,
        storm_calls=settings.loop_storm_threshold,
    )
