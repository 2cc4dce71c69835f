"""`GET /admin/api/models`: the model catalogue `GET /v1/models` serves, for the console's Models panel.

The same entries (id, display name, context window, input types where known),
all of them in one answer, behind the admin key instead of a client key.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from q2api.admin.responses import json_answer
from q2api.server.gateway import Gateway


async def list_models(request: Request, gateway: Gateway) -> Response:
    return json_answer({"data": list(gateway.models.entries())})
