"""How a credential is presented to Amazon Q: `Authorization: Bearer …`, and for a Kiro API key one more header.

A Kiro API key (`ksk_…`, Kiro CLI 2.0 headless mode) is sent as the bearer itself, with no token
exchange, plus `tokentype: API_KEY`; without that header the key is refused (docs/protocol.md#kiro-api-keys:
kirocc #87 confirmed it against a live key, KRS PR #134). Every call that
carries the credential — chat, the catalogue, credits, web search, profile listing — uses these
headers, so no call forgets the token type.
"""

from __future__ import annotations

API_KEY_AUTH = "api_key"  # the auth method (q2api.accounts) of an account whose credential is a Kiro API key
TOKEN_TYPE_HEADER = "tokentype"  # header names are case-insensitive: KRS sends `tokentype`, NR `TokenType`
API_KEY_TOKEN_TYPE = "API_KEY"


def token_type_of(auth_kind: str | None) -> str | None:
    """The `tokentype` an account of `auth_kind` sends: API_KEY for a Kiro API key, none for OIDC / social tokens."""
    return API_KEY_TOKEN_TYPE if auth_kind == API_KEY_AUTH else None


def authorization_headers(token: str, token_type: str | None = None) -> dict[str, str]:
    """The headers that carry `token` (the caller adds them to its own)."""
    headers = {"Authorization": f"Bearer {token}"}
    if token_type:
        headers[TOKEN_TYPE_HEADER] = token_type
    return headers
