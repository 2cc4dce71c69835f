"""Adding an account: its credentials checked by a real call, then stored.

Shared by `q2api accounts add` and `POST /admin/api/accounts`, so both refuse a
made-up or revoked credential the same way instead of listing it as `active`:
a refresh token by one refresh (an IdC login's profile is looked up then), a
Kiro API key by one `getUsageLimits` call with it (usage limits answer keys:
docs/protocol.md#kiro-api-keys), walking the hosts an API-key account's requests walk: one host's
401, 403 or 404 (or no connection) is that host's answer, and the next host is asked — one WARNING
per switch; the key is refused only when no host takes it and one of them refused it.

The verifying refresh may rotate the refresh token, after which the one the
operator gave is dead. So every field is checked against the stores' limits
before it (NewAccount), and a write that still fails afterwards is tried again
with the verified tokens: a few times while the operator waits, then (in the
gateway) in the background until the store takes it, as refreshed tokens are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence

import aiohttp
from loguru import logger
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential

from q2api.accounts.field_limits import check_account_fields
from q2api.accounts.logins import account_id_for_label
from q2api.accounts.records import Account, AccountStatus
from q2api.accounts.refresh import RefreshedToken, RefreshEndpoints, refresh_access_token
from q2api.accounts.store_protocol import CredentialStore
from q2api.amazonq.account_proxies import AccountProxies, check_proxy_url
from q2api.amazonq.attempts import host_of
from q2api.amazonq.bearer import API_KEY_AUTH, API_KEY_TOKEN_TYPE
from q2api.amazonq.credits import fetch_credits
from q2api.amazonq.errors import (
    HostUnreachable,
    RefreshRejected,
    RefreshUnavailable,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from q2api.amazonq.service_api import ServiceApi
from q2api.store.errors import STORE_ERRORS

# What one host answers a key it does not serve (A8.5: the statuses inference moves to the next host on).
HOST_ANSWER_STATUSES = frozenset({401, 403, 404})
# An API key's "expiry" in its verifying answer: none (it is used until Amazon Q refuses it).
NO_EXPIRY = float("inf")

# Seconds between the attempts to store a verified account while the operator waits (then it fails).
WRITE_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
BACKGROUND_RETRY_MAX_DELAY = 60.0


@dataclasses.dataclass(frozen=True, repr=False)
class NewAccount:
    """What an operator gives to add an account (secrets included: never log it).

    Either a refresh token (a login: IdC with its client registration, else Kiro social) or a Kiro API key.
    """

    label: str
    refresh_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    profile_arn: str | None = None
    region: str | None = None
    api_key: str | None = None
    proxy_url: str | None = None

    def __post_init__(self) -> None:
        if not self.label.strip():
            raise ValueError("label must not be empty")
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("api_key must not be empty")
        if self.refresh_token is not None and not self.refresh_token.strip():
            raise ValueError("refresh_token must not be empty")
        if bool(self.api_key) == bool(self.refresh_token):
            raise ValueError(
                "give either a refresh_token (a login) or an api_key (a Kiro API key), not both or neither"
            )
        if self.api_key and (self.client_id or self.client_secret or self.profile_arn):
            raise ValueError("an api_key account takes no client_id, client_secret or profile_arn")
        if bool(self.client_id) != bool(self.client_secret):
            raise ValueError("client_id and client_secret go together (an IdC login); give both or neither")
        if self.proxy_url is not None:
            object.__setattr__(self, "proxy_url", check_proxy_url(self.proxy_url))
        # Before the verifying refresh, which may rotate the refresh token: a row the store refused
        # afterwards would leave the login dead.
        check_account_fields(
            label=self.label,
            refresh_token=self.refresh_token,
            client_id=self.client_id,
            client_secret=self.client_secret,
            profile_arn=self.profile_arn,
            region=self.region,
            api_key=self.api_key,
            proxy_url=self.proxy_url,
        )

    @property
    def auth_method(self) -> str:
        """A Kiro API key; IdC (Builder ID / IAM Identity Center) when a client registration is given; else Kiro social."""
        if self.api_key:
            return API_KEY_AUTH
        return "idc" if self.client_id else "social"

    def __repr__(self) -> str:
        return f"NewAccount(label={self.label!r}, auth_method={self.auth_method!r})"


async def verify_new_account(
    session: aiohttp.ClientSession,
    endpoints: RefreshEndpoints,
    new: NewAccount,
    *,
    proxies: AccountProxies | None = None,
    amazonq_endpoints: Sequence[str] = (),
) -> RefreshedToken:
    """One real call with the given credentials. Raises RefreshRejected or RefreshUnavailable.

    A login is refreshed once; a Kiro API key makes a `getUsageLimits` call on `amazonq_endpoints`, in
    order, until one host takes it (the token it "refreshes" to is the key itself, with no expiry).
    """
    proxies = proxies or AccountProxies(session)
    if new.api_key:
        if not amazonq_endpoints:
            raise RefreshUnavailable("no Amazon Q endpoint to check the API key against")
        await _check_api_key(proxies, amazonq_endpoints, new, endpoints.timeout)
        return RefreshedToken(access_token=new.api_key, expires_at=NO_EXPIRY, refresh_token=None, profile_arn=None)
    now = time.time()
    candidate = Account(
        id="(new)",
        label=new.label,
        auth_method=new.auth_method,
        refresh_token=new.refresh_token,
        client_id=new.client_id,
        client_secret=new.client_secret,
        profile_arn=new.profile_arn,
        access_token=None,
        expires_at=None,
        status=AccountStatus.ACTIVE,
        status_detail=None,
        token_generation=0,
        created_at=now,
        updated_at=now,
        refreshed_at=None,
        region=new.region,
        proxy_url=new.proxy_url,
    )
    return await refresh_access_token(session, candidate, endpoints, proxies=proxies)


async def _check_api_key(proxies: AccountProxies, endpoints: Sequence[str], new: NewAccount, timeout: float) -> None:
    """Walk `endpoints` until one host answers the key's `getUsageLimits`; raise when none does."""
    assert new.api_key is not None
    answers: list[str] = []  # "host: what it said", for the operator when no host takes the key
    refused = False
    for index, endpoint in enumerate(endpoints):
        api = ServiceApi(proxies.direct, endpoint, timeout=timeout, proxies=proxies)
        try:
            await fetch_credits(
                api, new.api_key, profile_arn=None, token_type=API_KEY_TOKEN_TYPE, proxy_url=new.proxy_url
            )
        except UpstreamHTTPError as error:
            answers.append(f"{host_of(endpoint)}: HTTP {error.status} {error.message}")
            if error.status not in HOST_ANSWER_STATUSES:
                raise RefreshUnavailable(
                    f"could not check the API key: Amazon Q answered HTTP {error.status}"
                ) from None
            refused = refused or error.status in (401, 403)
            status = str(error.status)
        except (HostUnreachable, UpstreamUnavailable, UpstreamTimeout) as exc:
            answers.append(f"{host_of(endpoint)}: {exc}")
            status = "unreachable"
        except UpstreamError as exc:
            raise RefreshUnavailable(f"could not check the API key: {exc}") from None
        else:
            return
        if index + 1 < len(endpoints):
            # Host names and a status only: never the key.
            logger.warning(
                f"API key check moved to the next host: account={new.label} from={host_of(endpoint)} "
                f"to={host_of(endpoints[index + 1])} status={status}"
            )
    detail = "; ".join(answers)
    if refused:
        raise RefreshRejected(new.label, f"Amazon Q refused the API key on every host ({detail})")
    raise RefreshUnavailable(f"could not check the API key: no host answered it ({detail})")


async def store_new_account(
    store: CredentialStore,
    new: NewAccount,
    verified: RefreshedToken | None,
    *,
    retry_delays: tuple[float, ...] | None = None,
) -> tuple[Account, bool]:
    """Store `new` with the tokens of its verifying refresh; (account, True if it replaced one with the label).

    An existing account with the same label gets the new credentials (the fix
    for one that needs a new login). The refresh may have rotated the refresh
    token, so the rotated one is what is stored, and a failed write is tried
    again after each of `retry_delays` (WRITE_RETRY_DELAYS) before it raises.
    """
    delays = WRITE_RETRY_DELAYS if retry_delays is None else retry_delays
    for delay in (*delays, None):
        try:
            return await _write_new_account(store, new, verified)
        except STORE_ERRORS as exc:
            if delay is None or verified is None:  # unverified: the operator's own token still works
                raise
            logger.bind(account=new.label).error(
                f"could not store the verified account ({type(exc).__name__}: {exc}); its tokens are kept, trying"
                f" again in {delay:g}s"
            )
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


class BackgroundWrites:
    """Verified accounts the store could not take while the operator waited, written again until it
    does: the gateway's last resort, since the verifying refresh may have rotated the refresh token.

    Owned by what lives as long as the gateway (the admin surface): it holds the tasks (the event loop
    keeps only weak references to them) and, at shutdown, stops those still trying and says which
    accounts were not stored.
    """

    def __init__(self) -> None:
        self._tasks: dict[asyncio.Task[None], str] = {}  # task -> the account's label

    def __len__(self) -> int:
        """How many accounts are still waiting for the store."""
        return len(self._tasks)

    def store(self, store: CredentialStore, new: NewAccount, verified: RefreshedToken) -> None:
        """Keep trying to store a verified account until the store takes it."""

        async def keep_trying() -> None:
            try:
                async for attempt in AsyncRetrying(
                    wait=wait_exponential(multiplier=1.0, max=BACKGROUND_RETRY_MAX_DELAY),
                    retry=retry_if_exception_type(STORE_ERRORS),
                ):
                    with attempt:
                        await _write_new_account(store, new, verified)
            except Exception as exc:  # not a store failure (a label taken twice meanwhile): say so, never silently
                logger.bind(account=new.label).opt(exception=exc).error("could not store the verified account")
                return
            logger.bind(account=new.label).info("stored the verified account: the store works again")

        task = asyncio.get_running_loop().create_task(keep_trying())
        self._tasks[task] = new.label
        task.add_done_callback(self._tasks.pop)

    async def close(self) -> None:
        """Stop the writes still waiting (the gateway is stopping), naming each account they leave unstored."""
        pending = dict(self._tasks)
        for task, label in pending.items():
            logger.bind(account=label).error(
                "the gateway stops before the store took the verified account: add it again once the store works"
            )
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _write_new_account(
    store: CredentialStore, new: NewAccount, verified: RefreshedToken | None
) -> tuple[Account, bool]:
    existing_id = account_id_for_label(await store.accounts(), new.label)
    api_key = new.api_key
    account = await store.add(
        auth_method=new.auth_method,
        refresh_token=None if api_key else (verified.refresh_token if verified else None) or new.refresh_token,
        label=new.label,
        client_id=new.client_id,
        client_secret=new.client_secret,
        profile_arn=new.profile_arn or (verified.profile_arn if verified else None),
        access_token=api_key or (verified.access_token if verified else None),
        expires_at=None if api_key or verified is None else verified.expires_at,
        account_id=existing_id,
        region=new.region,
        proxy_url=new.proxy_url,
    )
    return account, existing_id is not None
