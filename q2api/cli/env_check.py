"""Start-up warnings for variables that look like q2api settings but are not.

A misspelt setting (`Q2API_LOG_LEVL=DEBUG`, `DEBUG_MESSAGE_CONVERSON=true`) is otherwise ignored
in silence and the operator wonders why nothing changed. Every `Q2API_*` / `AMAZONQ_*` name that
is not a setting is reported; a name without those prefixes only when it is very close to one the
gateway reads. Only names are reported, never values: a misspelt `AMAZONQ_REFRESH_TOKNE` still
holds a secret.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

from dotenv import dotenv_values

from q2api.settings import ENV_VARIABLES

PREFIXES = ("Q2API_", "AMAZONQ_")
# A name without those prefixes is reported only when it is this close to one the gateway reads
# (`DEBUG_MESSAGE_CONVERSON`): the environment is full of other programs' variables.
_CLOSE_ENOUGH = 0.85
# Read by tools beside the gateway, not by its settings.
TOOL_VARIABLES = ("Q2API_CALIBRATION_DIR",)  # bench/calibrate_tokens.py


@dataclasses.dataclass(frozen=True)
class UnknownVariable:
    name: str
    source: str  # "the environment" or the .env file's path
    suggestion: str | None

    def warning(self) -> str:
        hint = f"; did you mean {self.suggestion}?" if self.suggestion else ""
        return f"unknown setting {self.name} in {self.source} is ignored{hint}"


def unknown_variables(
    env: Mapping[str, str], env_file: str | Path | None = ".env", *, known: Iterable[str] = ()
) -> list[UnknownVariable]:
    """The q2api-looking variables of `env` and `env_file` that are not settings, each with its closest match."""
    names = {*ENV_VARIABLES, *TOOL_VARIABLES, *known}
    sources: list[tuple[str, Iterable[str]]] = [("the environment", env)]
    if env_file is not None and Path(env_file).is_file():
        sources.append((str(env_file), dotenv_values(env_file)))
    found: list[UnknownVariable] = []
    unprefixed = sorted(name for name in names if not name.startswith(PREFIXES))  # DEBUG_MESSAGE_CONVERSION
    for source, variables in sources:
        for name in sorted(variables):
            if name in names:
                continue
            if name.upper().startswith(PREFIXES):
                close = _closest_setting(name.upper(), names)
            else:
                close = difflib.get_close_matches(name.upper(), unprefixed, n=1, cutoff=_CLOSE_ENOUGH)
                if not close:
                    continue  # another program's variable
            found.append(UnknownVariable(name, source, close[0] if close else None))
    return found


def _closest_setting(name: str, names: Iterable[str]) -> list[str]:
    """The known name closest to `name`, compared without the prefixes every setting shares: with
    them, `Q2API_FROBNICATE` would look like `Q2API_CAPTURE` for their common `Q2API_` alone."""
    by_stem: dict[str, str] = {}
    for known in sorted(names):
        by_stem.setdefault(_stem(known), known)
    close = difflib.get_close_matches(_stem(name), sorted(by_stem), n=1, cutoff=0.6)
    return [by_stem[close[0]]] if close else []


def _stem(name: str) -> str:
    for prefix in PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name
