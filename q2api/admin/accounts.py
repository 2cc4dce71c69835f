"""`/admin/api/accounts…`: list, add (checked by a real call), enable/disable/rename, remove, refresh, usage.

An account is added from a refresh token (a login) or a Kiro API key (`api_key`), with an optional region
and proxy of its own. Answers show its profile ARN and its proxy with the credentials masked, never a secret.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from q2api.accounts.device_login import is_aws_region
from q2api.accounts.field_limits import check_account_fields
from q2api.accounts.onboarding import BackgroundWrites, NewAccount, store_new_account, verify_new_account
from q2api.accounts.records import Account, AccountStats, AccountStatus
from q2api.admin.audit import audit
from q2api.admin.responses import AdminError, iso_time, json_answer
from q2api.amazonq.account_proxies import describe_proxy
from q2api.amazonq.bearer import API_KEY_AUTH
from q2api.amazonq.errors import RefreshRejected, RefreshUnavailable
from q2api.server.cross_site import is_json_content_type
from q2api.server.gateway import Gateway
from q2api.server.wiring import api_key_check_urls
from q2api.store.errors import STORE_ERRORS

_MAX_BODY_BYTES = 64 * 1024
T = TypeVar("T")


class AddAccountBody(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    refresh_token: str | None = None
    api_key: str | None = None
    proxy: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    region: str | None = None
    profile_arn: str | None = None


class PatchAccountBody(msgspec.Struct, forbid_unknown_fields=True):
    enabled: bool | None = None
    label: str | None = None


async def list_accounts(request: Request, gateway: Gateway) -> Response:
    await gateway.reloader.tick()  # this worker's latest counts, and its pool in step with the store
    accounts = await gateway.store.accounts()
    stats = await gateway.store.read_stats()
    answers = [await account_answer(gateway, account, stats.get(account.id)) for account in accounts]
    audit("list accounts", read_only=True)
    return json_answer({"accounts": answers})


async def add_account(request: Request, gateway: Gateway, writes: BackgroundWrites) -> Response:
    """`writes`: where a verified account the store cannot take yet goes on being written."""
    body = await decode_body(request, AddAccountBody)
    if body.region is not None:
        check_region(body.region)
    try:
        new = NewAccount(
            label=body.label.strip(),
            refresh_token=None if body.refresh_token is None else body.refresh_token.strip(),
            api_key=None if body.api_key is None else body.api_key.strip(),
            client_id=_blank_to_none(body.client_id),
            client_secret=_blank_to_none(body.client_secret),
            profile_arn=_blank_to_none(body.profile_arn),
            region=body.region,
            proxy_url=_blank_to_none(body.proxy),
        )
    except ValueError as exc:
        raise AdminError(400, "invalid_request", str(exc)) from None
    try:
        verified = await verify_new_account(
            gateway.session,
            gateway.endpoints,
            new,
            proxies=gateway.proxies,
            amazonq_endpoints=api_key_check_urls(gateway.settings, new.region),
        )
    except RefreshRejected as exc:
        what = "Amazon Q refused this API key" if new.api_key else "the token service refused this refresh token"
        audit("add account", label=new.label, outcome="refresh_refused")
        raise AdminError(400, "refresh_refused", f"{what}, nothing was stored: {exc.detail}") from None
    except RefreshUnavailable as exc:
        audit("add account", label=new.label, outcome="token_service_unavailable")
        raise AdminError(503, "token_service_unavailable", f"{exc}; nothing was stored, try again") from None
    try:
        account, replaced = await store_new_account(gateway.store, new, verified)
    except STORE_ERRORS as exc:
        # The verifying refresh may have rotated the refresh token: never drop it (store_new_account logged why).
        writes.store(gateway.store, new, verified)
        audit("add account", label=new.label, outcome="store_unavailable")
        detail = (
            f"the {'API key' if new.api_key else 'refresh token'} works, but the account store is unavailable ({exc}): the verified tokens are kept"
            " and the account is stored as soon as the store answers again"
        )
        return json_answer({"status": "pending", "label": new.label, "detail": detail}, 202)
    await gateway.reloader.tick(force=True)  # served by this worker at once; the others follow within seconds
    audit("replace account credentials" if replaced else "add account", account_id=account.id, label=account.label)
    return json_answer(await account_answer(gateway, account, None), 200 if replaced else 201)


async def patch_account(request: Request, gateway: Gateway) -> Response:
    account = await existing_account(request, gateway)
    body = await decode_body(request, PatchAccountBody)
    if body.enabled is None and body.label is None:
        raise AdminError(400, "invalid_request", "give `enabled` (true or false) and/or `label`")
    label = None if body.label is None else body.label.strip()
    if label == "":
        raise AdminError(400, "invalid_request", "label must not be empty")
    try:
        check_account_fields(label=label)
    except ValueError as exc:
        raise AdminError(400, "invalid_request", str(exc)) from None
    updated = await gateway.store.update(account.id, enabled=body.enabled, label=label)
    if updated is None:
        raise _not_found(account.id)
    await gateway.reloader.tick(force=True)
    if body.enabled is not None:
        audit("enable account" if body.enabled else "disable account", account_id=updated.id, label=updated.label)
    if label is not None:
        audit(f"rename account (was {account.label!r})", account_id=updated.id, label=updated.label)
    return json_answer(await account_answer(gateway, updated, None))


async def delete_account(request: Request, gateway: Gateway) -> Response:
    account = await existing_account(request, gateway)
    if not await gateway.store.remove(account.id):
        raise _not_found(account.id)
    await gateway.reloader.tick(force=True)
    audit("remove account", account_id=account.id, label=account.label)
    return Response(status_code=204)


async def refresh_account(request: Request, gateway: Gateway) -> Response:
    account = await existing_account(request, gateway)
    if account.auth_method == API_KEY_AUTH:
        return await _check_api_key_account(gateway, account)
    manager = gateway.pool.manager(account.id) or gateway.pool.make_manager(
        account
    )  # a disabled one can be checked too
    try:
        refreshed = await manager.refresh_now()
    except RefreshRejected as exc:
        await gateway.reloader.tick(force=True)
        audit("refresh account", account_id=account.id, label=account.label, outcome="refresh_refused")
        raise AdminError(
            400,
            "refresh_refused",
            f"the token service refused the refresh; the account needs a new login: {exc.detail}",
        ) from None
    except RefreshUnavailable as exc:
        audit("refresh account", account_id=account.id, label=account.label, outcome="token_service_unavailable")
        raise AdminError(503, "token_service_unavailable", str(exc)) from None
    saved = not manager.has_unsaved_tokens
    answer: dict[str, Any] = {"id": refreshed.id, "token_expires_at": iso_time(refreshed.expires_at), "saved": saved}
    if not saved:
        # The token service rotated the tokens: that happened and must be said, whatever the store does.
        answer["detail"] = (
            "refreshed, but the account store did not take the new tokens: they serve from memory and are"
            " written as soon as the store answers again"
        )
    with contextlib.suppress(*STORE_ERRORS):  # the pool follows on the next tick; the failed save is logged
        await gateway.reloader.tick(force=True)
    audit("refresh account", account_id=account.id, label=account.label, outcome="ok" if saved else "not_saved")
    return json_answer(answer)


async def _check_api_key_account(gateway: Gateway, account: Account) -> Response:
    """A Kiro API key is never refreshed: "refresh" checks it with one call and records the answer."""
    try:
        check = NewAccount(label=account.label, api_key=account.access_token or "", proxy_url=account.proxy_url)
        await verify_new_account(
            gateway.session,
            gateway.endpoints,
            check,
            proxies=gateway.proxies,
            amazonq_endpoints=api_key_check_urls(gateway.settings, account.region),
        )
    except ValueError as exc:  # no key stored: nothing to check
        raise AdminError(400, "refresh_refused", f"the account holds no usable API key ({exc})") from None
    except RefreshRejected as exc:
        await gateway.store.set_status(account.id, AccountStatus.NEEDS_LOGIN, exc.detail)
        await gateway.reloader.tick(force=True)
        audit("check api key", account_id=account.id, label=account.label, outcome="refused")
        raise AdminError(400, "refresh_refused", f"{exc.detail}; add a new key") from None
    except RefreshUnavailable as exc:
        audit("check api key", account_id=account.id, label=account.label, outcome="unavailable")
        raise AdminError(503, "token_service_unavailable", str(exc)) from None
    if account.status is AccountStatus.NEEDS_LOGIN:
        await gateway.store.set_status(account.id, AccountStatus.ACTIVE, None)
    await gateway.reloader.tick(force=True)
    audit("check api key", account_id=account.id, label=account.label)
    return json_answer({"id": account.id, "token_expires_at": None})


async def account_usage(request: Request, gateway: Gateway) -> Response:
    account = await existing_account(request, gateway)
    usage = await gateway.account_usage(account)
    audit("read usage", account_id=account.id, label=account.label, read_only=True)
    if usage is None:
        raise AdminError(503, "usage_unknown", f"Amazon Q did not report the credits of account {account.id!r}")
    return json_answer(usage)


# -- shared pieces ----------------------------------------------------------------


async def account_answer(gateway: Gateway, account: Account, stats: AccountStats | None) -> dict[str, Any]:
    """An account as the admin API shows it: never a token, a client secret or the client id."""
    stats = stats or AccountStats()
    return {
        "id": account.id,
        "label": account.label,
        "auth_method": account.auth_method,
        "enabled": account.enabled,
        **_health(gateway, account),
        "status_detail": account.status_detail,
        "region": account.region,
        "profile_arn": account.profile_arn,
        "proxy": describe_proxy(account.proxy_url),
        "token_expires_at": iso_time(account.expires_at),
        "stats": {
            "requests": stats.requests,
            "failures": stats.failures,
            "last_error": stats.last_error,
            "last_used_at": iso_time(stats.last_used_at),
        },
        "usage": await gateway.account_usage(account),
    }


def _health(gateway: Gateway, account: Account) -> dict[str, str | None]:
    """`health`, and `health_until`: when a rest (throttle, quota, failures) ends, if the account rests."""
    if not account.enabled:
        return {"health": "disabled", "health_until": None}
    if account.status is AccountStatus.NEEDS_LOGIN:
        return {"health": "needs_login", "health_until": None}
    for view in gateway.pool.health():
        if view.account_id == account.id:
            until = iso_time(time.time() + view.resting_for) if view.resting_for > 0 else None
            return {"health": view.health, "health_until": until}
    return {"health": "ready", "health_until": None}


async def existing_account(request: Request, gateway: Gateway) -> Account:
    account_id = request.path_params["account_id"]
    account = await gateway.store.get(account_id)
    if account is None:
        raise _not_found(account_id)
    return account


async def decode_body(request: Request, kind: type[T]) -> T:
    declared = request.headers.get("content-type")
    if not is_json_content_type(declared):
        shown = repr(declared[:100]) if declared else "none"
        raise AdminError(415, "unsupported_media_type", f"Content-Type must be application/json (got {shown})")
    body = await request.body()
    if len(body) > _MAX_BODY_BYTES:
        raise AdminError(413, "request_too_large", f"the body exceeds {_MAX_BODY_BYTES} bytes")
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        raise AdminError(400, "invalid_request", f"invalid body: {exc}") from None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise AdminError(400, "invalid_request", "the body must be a JSON object") from None


def check_region(region: str) -> None:
    if not is_aws_region(region):
        raise AdminError(400, "invalid_request", f"region must be an AWS region name such as us-east-1, not {region!r}")


def _blank_to_none(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def _not_found(account_id: str) -> AdminError:
    return AdminError(404, "not_found", f"no account with id {account_id!r}")
