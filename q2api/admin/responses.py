"""The admin API's JSON answers and its one error envelope: `{"error": {"type", "message"}}`."""

from __future__ import annotations

import datetime

import orjson
from starlette.responses import Response


class AdminError(Exception):
    """An admin request that cannot be served; the message is for the operator (never a secret)."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message

    def response(self) -> Response:
        return json_answer({"error": {"type": self.error_type, "message": self.message}}, self.status)


def json_answer(body: object, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def iso_time(epoch: float | None) -> str | None:
    """Epoch seconds as an RFC 3339 UTC time, e.g. `2026-11-23T19:02:05Z`."""
    if epoch is None:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):  # out of range (an imported 1e20, NaN): unknown, not a 500
        return None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
