"""`/admin/api/usage`: the ledger's totals by key, model, account or day (as `q2api usage`), and
`/admin/api/usage/overview`: what the console's usage page draws."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from q2api.admin.responses import AdminError, json_answer
from q2api.server.gateway import Gateway
from q2api.store.errors import STORE_ERRORS
from q2api.tenants.usage_report import GROUPS, parse_since, usage_by, usage_overview

RANGES = {"24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400}
STACKS = ("key", "model")


async def usage_totals(request: Request, gateway: Gateway) -> Response:
    query = request.query_params
    by = query.get("by", "key")
    if by not in GROUPS:
        raise AdminError(400, "invalid_request", f"by must be one of {', '.join(GROUPS)}")
    try:
        since = parse_since(query.get("since", "7d"))
    except ValueError as exc:
        raise AdminError(400, "invalid_request", str(exc)) from None
    await gateway.tenancy.ledger.flush()  # this worker's latest rows first
    try:
        rows = await usage_by(gateway.tenancy.ledger.database, by, since)
    except STORE_ERRORS as exc:
        raise AdminError(503, "store_unavailable", f"the usage ledger is unavailable: {type(exc).__name__}") from None
    return json_answer({"by": by, "since": since, "rows": rows})


async def usage_page(request: Request, gateway: Gateway) -> Response:
    query = request.query_params
    span = query.get("range", "7d")
    stack = query.get("stack", "key")
    if span not in RANGES:
        raise AdminError(400, "invalid_request", f"range must be one of {', '.join(RANGES)}")
    if stack not in STACKS:
        raise AdminError(400, "invalid_request", f"stack must be one of {', '.join(STACKS)}")
    await gateway.tenancy.ledger.flush()
    now = time.time()
    try:
        overview = await usage_overview(
            gateway.tenancy.ledger.database,
            now - RANGES[span],
            hourly=span == "24h",
            stack=stack,  # type: ignore[arg-type]
            now=now,
        )
    except STORE_ERRORS as exc:
        raise AdminError(503, "store_unavailable", f"the usage ledger is unavailable: {type(exc).__name__}") from None
    return json_answer({"range": span, **overview})
