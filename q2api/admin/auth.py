"""The admin key: `Authorization: Bearer <Q2API_ADMIN_KEY>`, compared in constant time."""

from __future__ import annotations

import hmac

from loguru import logger
from starlette.requests import Request

from q2api.admin.responses import AdminError


class AdminKey:
    def __init__(self, key: str) -> None:
        if not key:
            raise ValueError("the admin key must not be empty")
        self._key = key.encode()

    def check(self, request: Request) -> None:
        """Raise a 401 unless the request carries the admin key (client keys never qualify)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        presented = token.strip().encode() if scheme.lower() == "bearer" else b""
        if not hmac.compare_digest(presented, self._key):
            logger.bind(actor="unknown", path=request.url.path).warning("admin request refused: no valid admin key")
            raise AdminError(401, "unauthorized", "Authorization: Bearer <Q2API_ADMIN_KEY> is required")
