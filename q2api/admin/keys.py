"""`/admin/api/keys…`: the client keys kept in the store — list, create (the key is in that answer
only), show, change, revoke — each with what it spent today and this month against its budgets."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from q2api.admin.accounts import decode_body
from q2api.admin.audit import audit
from q2api.admin.responses import AdminError, iso_time, json_answer
from q2api.server.gateway import Gateway
from q2api.store.errors import STORE_ERRORS
from q2api.tenants.keys import KeyProblem, KeyRecord, limits_as_given, parse_expiry, parse_models

Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


class CreateKeyBody(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    models: list[str] | None = None
    expires: str | None = None  # 2027-01-01, an RFC 3339 time, or 30d / 12h from now
    rpm: int | None = None
    tpm: int | None = None
    max_concurrent: int | None = None
    credits_per_day: float | None = None
    credits_per_month: float | None = None


class PatchKeyBody(msgspec.Struct, forbid_unknown_fields=True):
    """Fields left out stay as they are; `null` lifts a limit."""

    label: str | Unset = UNSET
    models: list[str] | Unset | None = UNSET
    expires: str | Unset | None = UNSET
    rpm: int | Unset | None = UNSET
    tpm: int | Unset | None = UNSET
    max_concurrent: int | Unset | None = UNSET
    credits_per_day: float | Unset | None = UNSET
    credits_per_month: float | Unset | None = UNSET


def _problem(problem: KeyProblem) -> AdminError:
    if problem.missing:
        return AdminError(404, "not_found", str(problem))
    if problem.conflict:
        return AdminError(409, "conflict", str(problem))
    return AdminError(400, "invalid_request", str(problem))


@contextlib.contextmanager
def _as_admin_errors() -> Iterator[None]:
    """A refused key (404, 409 or 400) or a store that does not answer (503) as the admin API's error."""
    try:
        yield
    except KeyProblem as problem:
        raise _problem(problem) from None
    except STORE_ERRORS as exc:
        raise AdminError(503, "store_unavailable", f"the key store is unavailable: {type(exc).__name__}") from None


def _models(models: list[str]) -> tuple[str, ...]:
    return parse_models(",".join(models))


async def key_answer(gateway: Gateway, record: KeyRecord) -> dict[str, Any]:
    answer = record.as_dict()
    for name in ("expires_at", "created_at", "updated_at", "revoked_at"):
        answer[name] = iso_time(answer[name])
    spent: dict[str, float | None]
    try:
        spent = dict(await gateway.tenancy.gate.spent(record))
    except Exception:  # spend is shown when the counters answer; a key is listed either way
        spent = {"credits_today": None, "credits_this_month": None}
    return {**answer, "status": record.status(time.time()), **spent}


async def list_keys(request: Request, gateway: Gateway) -> Response:
    with _as_admin_errors():
        records = await gateway.tenancy.directory.store.list()
    audit("list keys", read_only=True)
    return json_answer({"keys": [await key_answer(gateway, record) for record in records]})


async def create_key(request: Request, gateway: Gateway) -> Response:
    body = await decode_body(request, CreateKeyBody)
    with _as_admin_errors():
        limits = limits_as_given(
            models=",".join(body.models) if body.models is not None else None,
            expires=body.expires,
            rpm=body.rpm,
            tpm=body.tpm,
            max_concurrent=body.max_concurrent,
            credits_per_day=body.credits_per_day,
            credits_per_month=body.credits_per_month,
        )
        key, record = await gateway.tenancy.directory.store.create(body.label, limits)
    audit("create key", label=record.label)
    return json_answer({"key": key, **(await key_answer(gateway, record))}, 201)


async def show_key(request: Request, gateway: Gateway) -> Response:
    return json_answer(await key_answer(gateway, await _find(request, gateway)))


async def patch_key(request: Request, gateway: Gateway) -> Response:
    body = await decode_body(request, PatchKeyBody)
    changes: dict[str, Any] = {}
    with _as_admin_errors():
        for name in ("label", "rpm", "tpm", "max_concurrent", "credits_per_day", "credits_per_month"):
            value = getattr(body, name)
            if value is not UNSET:
                changes[name] = value
        if body.models is not UNSET:
            changes["models"] = _models(body.models) if body.models is not None else None
        if body.expires is not UNSET:
            changes["expires_at"] = parse_expiry(body.expires) if body.expires is not None else None
        record = await gateway.tenancy.directory.store.update(request.path_params["key"], changes)
    audit("update key", label=record.label)
    return json_answer(await key_answer(gateway, record))


async def revoke_key(request: Request, gateway: Gateway) -> Response:
    with _as_admin_errors():
        record = await gateway.tenancy.directory.store.revoke(request.path_params["key"])
    audit("revoke key", label=record.label)
    return json_answer(await key_answer(gateway, record))


async def _find(request: Request, gateway: Gateway) -> KeyRecord:
    with _as_admin_errors():
        return await gateway.tenancy.directory.store.find(request.path_params["key"])
