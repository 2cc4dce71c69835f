"""`/admin/api/captures…`: the capture files of failed requests — list, download, remove.

    GET    /admin/api/captures        {"captures": [summary, …] newest first, "mode", "directory", "limits"}
    GET    /admin/api/captures/{id}   the capture file itself (JSON, as an attachment)
    DELETE /admin/api/captures/{id}   204

The files live in `Q2API_CAPTURE_DIR`, shared by every worker; they hold no secret, but they do
hold the user's conversation (unless `Q2API_CAPTURE_REDACT_TEXT` is on): behind the admin key.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from q2api.admin.audit import audit
from q2api.admin.responses import AdminError, json_answer
from q2api.server.captures.store import MAX_CAPTURE_BYTES, MAX_CAPTURES
from q2api.server.gateway import Gateway


async def list_captures(request: Request, gateway: Gateway) -> Response:
    store = gateway.captures.store

    def read() -> list[dict[str, object]]:
        return [store.summary(entry) for entry in store.entries()]

    summaries = await asyncio.to_thread(read)
    return json_answer(
        {
            "captures": summaries,
            "mode": str(gateway.captures.mode),
            "text_redacted": gateway.captures.redact_text,
            "directory": str(store.directory),
            "limits": {"count": MAX_CAPTURES, "bytes": MAX_CAPTURE_BYTES},
        }
    )


async def get_capture(request: Request, gateway: Gateway) -> Response:
    capture_id = request.path_params["capture_id"]
    try:
        data = await asyncio.to_thread(gateway.captures.store.read, capture_id)
    except FileNotFoundError:
        raise AdminError(404, "not_found", f"no capture {capture_id!r}") from None
    # INFO though it changes nothing: a capture holds a conversation's text, and who took one is worth keeping.
    audit(f"download capture {capture_id}")
    return Response(
        data,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{capture_id}.json"'},
    )


async def delete_capture(request: Request, gateway: Gateway) -> Response:
    capture_id = request.path_params["capture_id"]
    removed = await asyncio.to_thread(gateway.captures.store.remove, capture_id)
    if not removed:
        raise AdminError(404, "not_found", f"no capture {capture_id!r}")
    audit(f"remove capture {capture_id}")
    return Response(status_code=204)
