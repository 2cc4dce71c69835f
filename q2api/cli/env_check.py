"""Start-up warnings for `Q2API_*` / `AMAZONQ_*` variables that q2api does not know.

A misspelt setting (`Q2API_LOG_LEVL=DEBUG`) is otherwise ignored in silence and
the operator wonders why nothing changed. Only names are reported, never
values: a misspelt `AMAZONQ_REFRESH_TOKNE` still holds a secret.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

from dotenv import dotenv_values

from q2api.settings import ENV_VARIABLES

PREFIXES = ("Q2API_", "AMAZONQ_")
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
    for source, variables in sources:
        for name in sorted(variables):
            if name in names or not name.upper().startswith(PREFIXES):
                continue
            close = difflib.get_close_matches(name.upper(), sorted(names), n=1, cutoff=0.6)
            found.append(UnknownVariable(name, source, close[0] if close else None))
    return found
