"""Start-up warnings about variables: misspelt names q2api would ignore, and deprecated ones it still reads.

A misspelt setting (`Q2API_LOG_LEVL=DEBUG`) is otherwise ignored in silence and
the operator wonders why nothing changed. Every name q2api reads is known
here, from the settings table: a name in one of q2api's own prefix families
(`Q2API_*`, `AMAZONQ_*`) that is not one of them is reported, with the closest
known name. Any other name may be another program's, so it is reported only as
a near miss of a known one: `DEBUG_MESAGE_CONVERSION`, or a misspelt prefix
(`Q2PI_LOG_LEVEL`). Only names are
reported, never values: a misspelt `AMAZONQ_REFRESH_TOKNE` still holds a secret.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

from dotenv import dotenv_values

from q2api.settings import DEPRECATED_VARIABLES, READ_VARIABLES

# Every name in these families is q2api's, so any unknown one is a mistake.
PREFIXES = ("Q2API_", "AMAZONQ_")
# How alike (difflib's ratio, 0..1) a name must be to a known one to be worth a suggestion; and, for a
# name outside the families (which may well be another program's), to be reported at all: one edit in
# a name of 15 characters still scores about 0.93, while other programs' names score far lower.
SUGGESTION_CUTOFF = 0.6
NEAR_MISS_CUTOFF = 0.85
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


@dataclasses.dataclass(frozen=True)
class DeprecatedVariable:
    name: str
    source: str
    replacement: str

    def warning(self) -> str:
        return f"setting {self.name} in {self.source} is deprecated and will be removed: {self.replacement}"


def _sources(env: Mapping[str, str], env_file: str | Path | None) -> list[tuple[str, Iterable[str]]]:
    sources: list[tuple[str, Iterable[str]]] = [("the environment", env)]
    if env_file is not None and Path(env_file).is_file():
        sources.append((str(env_file), dotenv_values(env_file)))
    return sources


def unknown_variables(
    env: Mapping[str, str], env_file: str | Path | None = ".env", *, known: Iterable[str] = ()
) -> list[UnknownVariable]:
    """The q2api-looking variables of `env` and `env_file` that q2api does not read, each with its closest match."""
    names = sorted({*READ_VARIABLES, *TOOL_VARIABLES, *known})
    found: list[UnknownVariable] = []
    for source, variables in _sources(env, env_file):
        for name in sorted(variables):
            if name in names:
                continue
            if name.upper().startswith(PREFIXES):
                close = _closest_setting(name.upper(), names)
            else:
                close = difflib.get_close_matches(name.upper(), names, n=1, cutoff=NEAR_MISS_CUTOFF)
                if not close:
                    continue  # another program's variable
            found.append(UnknownVariable(name, source, close[0] if close else None))
    return found


def _closest_setting(name: str, names: Iterable[str]) -> list[str]:
    """The known name closest to `name`, compared without the prefixes settings share: with them,
    `Q2API_FROBNICATE` would look like `Q2API_CAPTURE` for their common `Q2API_` alone.

    A single slip of the keyboard inside the family comes first: `Q2API_API_KEY` means `Q2API_API_KEYS`,
    though its stem is exactly `AMAZONQ_API_KEY`'s. Then a name whose stem is exactly a known one's has
    only its prefix wrong (`Q2API_REFRESH_TOKEN`). Otherwise names of the same family are looked at
    first, since the prefix is the part least likely misspelt: `Q2API_API_KESY` means `Q2API_API_KEYS`,
    though its stem is nearer `AMAZONQ_API_KEY`'s.
    """
    known_names = sorted(names)
    family = [known for known in known_names if known.startswith(name[: name.index("_") + 1])]
    one_slip = [known for known in family if _one_edit_apart(name, known)]
    if one_slip:
        return one_slip[:1]
    same_stem = [known for known in known_names if _stem(known) == _stem(name)]
    if same_stem:
        return same_stem[:1]
    return _closest_by_stem(name, family) or _closest_by_stem(name, known_names)


def _one_edit_apart(typed: str, known: str) -> bool:
    """Whether one letter left out, added, changed, or two neighbours swapped turns `known` into `typed`."""
    if abs(len(typed) - len(known)) > 1 or typed == known:
        return False
    start = 0
    while start < min(len(typed), len(known)) and typed[start] == known[start]:
        start += 1
    if len(typed) == len(known):
        swapped = typed[start : start + 2][::-1] == known[start : start + 2]
        return typed[start + 1 :] == known[start + 1 :] or (swapped and typed[start + 2 :] == known[start + 2 :])
    shorter, longer = sorted((typed, known), key=len)
    return shorter[start:] == longer[start + 1 :]


def _closest_by_stem(name: str, names: Iterable[str]) -> list[str]:
    by_stem: dict[str, str] = {}
    for known in names:
        by_stem.setdefault(_stem(known), known)
    close = difflib.get_close_matches(_stem(name), sorted(by_stem), n=1, cutoff=SUGGESTION_CUTOFF)
    return [by_stem[close[0]]] if close else []


def _stem(name: str) -> str:
    for prefix in PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def deprecated_variables(env: Mapping[str, str], env_file: str | Path | None = ".env") -> list[DeprecatedVariable]:
    """The deprecated settings `env` and `env_file` still set, each with what replaces it."""
    return [
        DeprecatedVariable(name, source, DEPRECATED_VARIABLES[name])
        for source, variables in _sources(env, env_file)
        for name in sorted(variables)
        if name in DEPRECATED_VARIABLES
    ]
