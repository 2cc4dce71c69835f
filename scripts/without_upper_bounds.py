"""Print pyproject.toml's requirements that have an upper bound, with the bound taken off.

    python scripts/without_upper_bounds.py pyproject.toml > overrides.txt

`.ci/run --latest --unbounded` hands the result to `uv pip install --override`, which puts each line
in place of every requirement on that package, so the newest releases are installed past q2api's
own bounds. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

# name, optional [extras], then the specifiers (a marker after `;` is kept as it is).
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)\s*(.*)$")


def without_upper_bound(requirement: str) -> str | None:
    """The requirement without its `<`, `<=` and `~=` ceilings; None when it has none."""
    body, semicolon, marker = requirement.partition(";")
    match = _REQUIREMENT.match(body)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    name, specifiers = match.groups()
    kept: list[str] = []
    bounded = False
    for specifier in filter(None, (part.strip() for part in specifiers.split(","))):
        if specifier.startswith("<"):
            bounded = True
        elif specifier.startswith("~="):
            bounded = True
            kept.append(">=" + specifier[2:].strip())  # ~=X.Y means >=X.Y and <X+1
        else:
            kept.append(specifier)
    if not bounded:
        return None
    return name + ",".join(kept) + (f" ;{marker}" if semicolon else "")


def requirements(pyproject: Path) -> Iterator[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    yield from project.get("dependencies", [])
    for extra in project.get("optional-dependencies", {}).values():
        yield from extra


def unbounded(requirements: Iterable[str]) -> list[str]:
    return [line for line in map(without_upper_bound, requirements) if line is not None]


if __name__ == "__main__":
    print("\n".join(unbounded(requirements(Path(sys.argv[1])))))
