"""The admin API's fuzzer (`/admin/api/...`): bodies for the routes that take one (keys, accounts,
logins), queries and path parameters for the rest, and the judge of its `{"error": {type, message}}`."""

from __future__ import annotations

import orjson

from tests.support.fuzz_request import FuzzRequest, finish
from tests.support.hostile_values import Hostile


def admin(h: Hostile) -> FuzzRequest:
    """The admin API: bodies for the routes that take one, queries and path parameters for the rest."""
    key = h.pick(("qk_nope", h.text()))
    kind = h.rng.randrange(10)
    if kind < 3:
        document = h.fields(
            {"label": h.text()},
            {name: h.number() for name in ("rpm", "tpm", "max_concurrent", "credits_per_day", "credits_per_month")}
            | {"models": [h.text()], "expires": h.pick(("30d", "2027-01-01", "-5d", "99999999d", h.text()))},
            keep=0.4,
        )
        request = finish(h, "/admin/api/keys", document)
        return request if kind < 2 else FuzzRequest("PATCH", f"/admin/api/keys/{_path_part(h, key)}", request.body)
    if kind < 5:
        document = h.fields(
            {"label": h.text()},
            {
                "refresh_token": h.text(),
                "api_key": h.text(),
                "proxy": h.pick(("socks9://x", "http://[::1", h.text())),
                "region": h.text(),
                "profile_arn": h.text(),
                "client_id": h.text(),
                "client_secret": h.text(),
            },
        )
        if kind == 4:
            document = h.fields({}, {"enabled": h.wrong(), "label": h.text()}, keep=0.6)
            return FuzzRequest("PATCH", f"/admin/api/accounts/{_path_part(h, h.text())}", finish(h, "", document).body)
        return finish(h, "/admin/api/accounts", document)
    if kind == 5:
        document = h.fields(
            {"label": h.text()},
            {"method": h.pick(("builder-id", "idc", "nope")), "start_url": h.text(), "region": h.text()},
        )
        return finish(h, "/admin/api/logins", document)
    query = "&".join(
        f"{h.pick(('by', 'since', 'range', 'stack', 'limit', 'key', 'x'))}={_path_part(h, h.text())}"
        for _ in range(h.rng.randrange(4))
    )
    path = h.pick(
        (
            "/admin/api/usage",
            "/admin/api/usage/overview",
            "/admin/api/activity",
            "/admin/api/captures",
            f"/admin/api/captures/{_path_part(h, h.text())}",
            f"/admin/api/keys/{_path_part(h, key)}",
            f"/admin/api/accounts/{_path_part(h, h.text())}/usage",
            f"/admin/api/logins/{_path_part(h, h.text())}",
        )
    )
    method = h.pick(("GET", "GET", "DELETE")) if "/usage" not in path and "activity" not in path else "GET"
    return FuzzRequest(method, f"{path}?{query}", b"")


def _path_part(h: Hostile, text: str) -> str:
    """`text` as a URL path part or query value: percent-encoded bytes, even invalid UTF-8 ones."""
    raw = text.encode("utf-8", "surrogatepass") + (h.pick((b"", b"\xff", b"%", b"\x00")))
    return "".join(chr(byte) if chr(byte).isalnum() else f"%{byte:02X}" for byte in raw) or "x"


def admin_problem(status: int, body: bytes) -> str | None:
    if status >= 500:
        return f"status {status}: {body[:300]!r}"
    if status < 400:
        return None
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return f"status {status} without a JSON body: {body[:300]!r}"
    error = document.get("error") if isinstance(document, dict) else None
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("type"), str)
        or not isinstance(error.get("message"), str)
    ):
        return f"status {status} without the admin envelope: {document!r:.300}"
    return None
