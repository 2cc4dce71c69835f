"""One typed settings object, every variable declared once, read from the environment and a `.env` file.

Only the app factory and the CLI call :func:`load_settings`; everything else
receives the values it needs as arguments. The environment wins over `.env`,
which wins over the defaults. A bad value stops start-up with a message that
names the variable, and secrets never appear in the object's repr.

Every variable is declared once, as a field of :class:`Settings` in
`table.py` (name, parser, default, group, description, secret, `serve` flag).
Derived from that table: the loader (`loading.py`), the `q2api serve` flags
and the start-up typo and deprecation warnings (`q2api.cli`), and the two
generated files, `docs/configuration.md` and `.env.example`
(`python -m q2api.settings --write-docs`; `--check` fails when they are stale).

Why a table of our own rather than pydantic-settings: importing
pydantic-settings costs every worker about 8.6 MB of RSS (VmRSS after
importing the CLI, the app and uvicorn: 50.0 MB without, 58.6 MB with; the
idle target is 60 MB per worker and the worker measures 54.3 MB), and pydantic
would come in for it alone once the `anthropic` SDK is a demo extra. It would
not remove the parsers either: its validation errors have their own wording,
while q2api's messages ("Q2API_MAX_RETRIES must be an integer, got 'many'")
are what users and tests read, so each variable would still need a validator
of ours; and it generates neither the reference nor `.env.example`, nor warns
about misspelt names. What remains for a library to do, merging the
environment over `.env`, is python-dotenv and ten lines.
"""

from __future__ import annotations

from types import MappingProxyType

from q2api.settings.command_inputs import COMMAND_INPUTS, CommandInput
from q2api.settings.declaration import Group, Variable, mask_secret
from q2api.settings.loading import load_settings
from q2api.settings.parsers import SettingsError
from q2api.settings.table import (
    DEFAULT_ENDPOINT,
    DEFAULT_KIRO_REFRESH_ENDPOINT,
    DEFAULT_OIDC_ENDPOINT,
    LOG_LEVELS,
    VARIABLES,
    AuthMethod,
    CaptureMode,
    LogFormat,
    Settings,
    UnknownModel,
)

# The settings' variables a new configuration uses (deprecated ones left out: `.env.example` lists these).
ENV_VARIABLES: tuple[str, ...] = tuple(variable.name for variable in VARIABLES if not variable.deprecated)
# Deprecated variable → what replaces it. Still read; `q2api serve` warns at start-up.
DEPRECATED_VARIABLES = MappingProxyType(
    {variable.name: variable.deprecated for variable in VARIABLES if variable.deprecated}
)
# Every name q2api reads: the settings (deprecated ones included) and the commands' own inputs.
READ_VARIABLES: tuple[str, ...] = (
    *(variable.name for variable in VARIABLES),
    *(command_input.name for command_input in COMMAND_INPUTS),
)
# Fields whose values are secrets: masked in repr, never logged.
SECRET_FIELDS = frozenset(variable.field for variable in VARIABLES if variable.secret)

__all__ = [
    "COMMAND_INPUTS",
    "DEFAULT_ENDPOINT",
    "DEFAULT_KIRO_REFRESH_ENDPOINT",
    "DEFAULT_OIDC_ENDPOINT",
    "DEPRECATED_VARIABLES",
    "ENV_VARIABLES",
    "LOG_LEVELS",
    "READ_VARIABLES",
    "SECRET_FIELDS",
    "VARIABLES",
    "AuthMethod",
    "CaptureMode",
    "CommandInput",
    "Group",
    "LogFormat",
    "Settings",
    "SettingsError",
    "UnknownModel",
    "Variable",
    "load_settings",
    "mask_secret",
]
