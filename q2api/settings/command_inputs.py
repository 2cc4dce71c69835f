"""Variables a command reads besides the settings: declared here so the typo check and the reference know them.

They are not `Settings` fields: the gateway never reads them, only the command
named beside each, and only while it runs.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CommandInput:
    name: str
    command: str
    description: str
    secret: bool


# The secrets of `q2api accounts add`, which would otherwise be given as arguments (visible in `ps`).
NEW_REFRESH_TOKEN = CommandInput(
    "Q2API_NEW_REFRESH_TOKEN",
    "q2api accounts add",
    "The refresh token of the account to add. Preferred over `--refresh-token`, which other users of the "
    "machine can read (`ps`, shell history); on a terminal a missing token is asked for. See "
    "[Accounts](accounts.md#more-accounts).",
    secret=True,
)
NEW_CLIENT_SECRET = CommandInput(
    "Q2API_NEW_CLIENT_SECRET",
    "q2api accounts add",
    "The OIDC client secret of the account to add (IdC logins). Preferred over `--client-secret`.",
    secret=True,
)
NEW_API_KEY = CommandInput(
    "Q2API_NEW_API_KEY",
    "q2api accounts add",
    "A Kiro API key (`ksk_…`) to add as an account instead of a login (`Q2API_NEW_API_KEY=ksk_… q2api "
    "accounts add --label L`); checked by one call to Amazon Q before it is stored. See "
    "[Accounts](accounts.md#kiro-api-keys).",
    secret=True,
)
COMMAND_INPUTS = (NEW_REFRESH_TOKEN, NEW_CLIENT_SECRET, NEW_API_KEY)
