"""`GET /admin/api/activity`: the last requests this worker served (q2api.server.activity's ring)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from q2api.admin.responses import AdminError, json_answer
from q2api.server.activity import ACTIVITY_SIZE
from q2api.server.gateway import Gateway

DEFAULT_LIMIT = 50


async def list_activity(request: Request, gateway: Gateway) -> Response:
    limit_text = request.query_params.get("limit", str(DEFAULT_LIMIT))
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= ACTIVITY_SIZE:
        raise AdminError(400, "invalid_request", f"limit must be an integer between 1 and {ACTIVITY_SIZE}")
    entries = gateway.activity.latest(int(limit_text))
    return json_answer({"requests": entries, "size": ACTIVITY_SIZE})
