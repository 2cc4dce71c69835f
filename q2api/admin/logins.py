"""`/admin/api/logins`: a device-code login from the browser, finished in this worker's background.

`POST` registers a client, starts the device authorization and answers with the
verification URL and code at once; a background task polls the token service
and stores the account when the user approves. The login's status lives in the
store, so `GET /admin/api/logins/{login_id}` is answered by any worker.

Each pending login holds a registered client and a background task: a worker
runs at most MAX_PENDING_LOGINS at once (429 beyond), and `DELETE
/admin/api/logins/{login_id}` cancels one, whichever worker runs it (each
login's task watches its record in the store).
"""

from __future__ import annotations

import asyncio
from typing import Literal

import msgspec
from loguru import logger
from starlette.requests import Request
from starlette.responses import Response

from q2api.accounts.device_login import (
    DeviceLogin,
    DeviceLoginError,
    LoginFailed,
    login_target,
    start_device_login,
)
from q2api.accounts.field_limits import check_account_fields
from q2api.accounts.logins import complete_device_login, new_login_id, status_of_failure
from q2api.accounts.records import LoginStatus
from q2api.admin.accounts import decode_body
from q2api.admin.audit import audit
from q2api.admin.responses import AdminError, json_answer
from q2api.server.gateway import Gateway
from q2api.store.errors import STORE_ERRORS


class StartLoginBody(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    method: Literal["builder-id", "idc"] = "builder-id"
    start_url: str | None = None
    region: str | None = None


MAX_PENDING_LOGINS = 8  # per worker: each one is a registered OIDC client and a polling task
CANCEL_CHECK_INTERVAL = 2.0  # seconds between a pending login's looks at its record (cancelled elsewhere?)


class LoginRunner:
    """The logins this worker is polling for; `close` cancels them at shutdown."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def run(self, gateway: Gateway, login_id: str, login: DeviceLogin, label: str, region: str) -> None:
        task = asyncio.get_running_loop().create_task(self._watched(gateway, login_id, login, label, region))
        self._tasks[login_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(login_id, None))

    def cancel(self, login_id: str) -> None:
        """Stop polling for `login_id` if this worker runs it (its record says `cancelled` already)."""
        task = self._tasks.get(login_id)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @classmethod
    async def _watched(cls, gateway: Gateway, login_id: str, login: DeviceLogin, label: str, region: str) -> None:
        """The login, until it ends or its record stops being pending (cancelled by another worker)."""
        finishing = asyncio.ensure_future(cls._finish(gateway, login_id, login, label, region))
        try:
            while not finishing.done():
                await asyncio.wait({finishing}, timeout=CANCEL_CHECK_INTERVAL)
                if not finishing.done() and await _cancelled_elsewhere(gateway, login_id):
                    finishing.cancel()
                    audit(f"login {login_id}", label=label, outcome="cancelled")
        finally:
            finishing.cancel()
            await asyncio.gather(finishing, return_exceptions=True)

    @staticmethod
    async def _finish(gateway: Gateway, login_id: str, login: DeviceLogin, label: str, region: str) -> None:
        try:
            account = await complete_device_login(
                gateway.session,
                gateway.store,
                login,
                label=label,
                region=region,
                profile_hosts=gateway.endpoints.profile_hosts,
            )
        except DeviceLoginError as exc:
            status = status_of_failure(exc)
            await gateway.store.finish_login(login_id, status, detail=str(exc))
            audit(f"login {login_id}", label=label, outcome=status.value)
            return
        except Exception as exc:  # the login must end visibly, whatever broke
            logger.opt(exception=exc).error(f"device login {login_id} failed unexpectedly")
            await gateway.store.finish_login(login_id, LoginStatus.FAILED, detail="internal error")
            return
        await gateway.store.finish_login(login_id, LoginStatus.DONE, account.id)
        await gateway.reloader.tick(force=True)
        audit(f"login {login_id}", account_id=account.id, label=account.label, outcome="done")


async def _cancelled_elsewhere(gateway: Gateway, login_id: str) -> bool:
    try:
        record = await gateway.store.read_login(login_id)
    except STORE_ERRORS:
        return False  # the store is failing: keep polling, the login may still end well
    return record is not None and record.status is LoginStatus.CANCELLED


async def start_login(request: Request, gateway: Gateway, runner: LoginRunner) -> Response:
    body = await decode_body(request, StartLoginBody)
    label = body.label.strip()
    if not label:
        raise AdminError(400, "invalid_request", "label must not be empty")
    if runner.pending >= MAX_PENDING_LOGINS:
        raise AdminError(
            429,
            "too_many_logins",
            f"{runner.pending} device logins are pending on this worker already; let one finish or cancel one"
            " (DELETE /admin/api/logins/{login_id})",
        )
    try:
        check_account_fields(label=label)  # before the login: its account could not be stored afterwards
        start_url, region = login_target(body.method, body.start_url, body.region)
    except ValueError as exc:
        raise AdminError(400, "invalid_request", str(exc)) from None
    try:
        login = await start_device_login(gateway.session, gateway.endpoints.oidc_for(region), start_url)
    except LoginFailed as exc:
        audit("start login", label=label, outcome="failed")
        raise AdminError(502, "login_failed", str(exc)) from None
    login_id = new_login_id()
    authorization = login.authorization
    await gateway.store.record_login(login_id, label, body.method, authorization.expires_in)
    runner.run(gateway, login_id, login, label, region)
    audit(f"start login {login_id} ({body.method})", label=label)
    return json_answer(
        {
            "login_id": login_id,
            "verification_uri": authorization.verification_uri,
            "verification_uri_complete": authorization.verification_uri_complete,
            "user_code": authorization.user_code,
            "expires_in": int(authorization.expires_in),
        },
        201,
    )


async def cancel_login(request: Request, gateway: Gateway, runner: LoginRunner) -> Response:
    """Cancel a pending login: its record says `cancelled`, and the worker polling for it stops."""
    login_id = request.path_params["login_id"]
    record = await gateway.store.read_login(login_id)
    if record is None:
        raise AdminError(404, "not_found", f"no login with id {login_id!r}")
    # Only a login still pending is cancelled, in the same statement that checks it: one that ended
    # meanwhile (its account stored) keeps its `done`.
    if record.status is not LoginStatus.PENDING or not await gateway.store.cancel_login(
        login_id, detail="cancelled by the operator"
    ):
        ended = await gateway.store.read_login(login_id) or record
        raise AdminError(409, "login_not_pending", f"login {login_id!r} is {ended.status.value}, not pending")
    runner.cancel(login_id)
    audit(f"cancel login {login_id}", label=record.label)
    return Response(status_code=204)


async def login_status(request: Request, gateway: Gateway) -> Response:
    login_id = request.path_params["login_id"]
    record = await gateway.store.read_login(login_id)
    if record is None:
        raise AdminError(404, "not_found", f"no login with id {login_id!r}")
    answer: dict[str, str] = {"status": record.status.value, "label": record.label}
    if record.account_id:
        answer["account_id"] = record.account_id
    if record.detail and record.status is not LoginStatus.DONE:
        answer["detail"] = record.detail
    return json_answer(answer)
