"""What the account stores accept in each field an operator gives, declared once.

The store's columns are sized from these (store_schema.py); the store checks a new account against them (`add`), and the CLI and the admin API
check the operator's input before the verifying refresh, which may rotate the
refresh token: a row the store then refused would leave the login dead.
SQLite has no column sizes, but takes the same limits, so that an account moves
between the stores (`q2api accounts copy`) without a surprise.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

ID_CHARS = 64
LABEL_CHARS = 255
CLIENT_ID_CHARS = 255
PROFILE_ARN_CHARS = 512
REGION_CHARS = 32
PROXY_URL_CHARS = 2048  # a proxy URL, credentials included
# Secrets are TEXT columns, Fernet-sealed in a shared store (a third larger, base64): MySQL's TEXT holds
# 65,535 bytes. A real refresh token or client secret is a few KB.
SECRET_CHARS = 16 * 1024

# The operator's fields, by the name the CLI flags and admin API fields use.
FIELD_CHARS: Mapping[str, int] = MappingProxyType(
    {
        "account_id": ID_CHARS,
        "label": LABEL_CHARS,
        "refresh_token": SECRET_CHARS,
        "client_id": CLIENT_ID_CHARS,
        "client_secret": SECRET_CHARS,
        "profile_arn": PROFILE_ARN_CHARS,
        "region": REGION_CHARS,
        "api_key": SECRET_CHARS,
        "proxy_url": PROXY_URL_CHARS,
    }
)


# Sent as an HTTP header as it is (`Authorization: Bearer <api key>`): ASCII only.
HEADER_FIELDS = frozenset({"api_key"})
# Identifiers that end up in headers, host names or URLs: no control characters. (Secrets sent in JSON
# bodies, such as refresh tokens, are left as they are: a stray line break there harms nothing.)
_PLAIN_FIELDS = frozenset({"api_key", "region", "profile_arn", "client_id"})


def _has_control_character(value: str) -> bool:
    return any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in value)


def check_account_fields(**fields: str | None) -> None:
    """Raise ValueError naming the first field no store would take (too long, a NUL, not valid text).

    The message names the field and its limit, never its value (it may be a secret).
    """
    for name, value in fields.items():
        if value is None:
            continue
        limit = FIELD_CHARS[name]
        if len(value) > limit:
            raise ValueError(f"{name} is too long: {len(value)} characters, at most {limit}")
        if "\x00" in value:
            raise ValueError(f"{name} must not contain a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{name} is not valid text (a lone surrogate)") from None
        if (name in HEADER_FIELDS and not value.isascii()) or (name in _PLAIN_FIELDS and _has_control_character(value)):
            # These travel in HTTP headers and host names (an API key is a bearer token; a region is part
            # of a host name), where the HTTP client refuses a line break with an exception: say so here.
            raise ValueError(f"{name} must be printable text without control characters")
