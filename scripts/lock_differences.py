"""Say which installed releases differ from requirements.lock (after `.ci/run --latest`).

    python scripts/lock_differences.py requirements.lock installed.txt

Both files hold `name==version` lines (the lock's markers and comments are ignored). Standard library
only, like the rest of what `.ci/run` runs before the checks.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")


def pins(path: Path) -> dict[str, str]:
    """Normalised name (PEP 503) → version, for every `name==version` line."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return found


def differences(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    lines = []
    for name in sorted(installed.keys() - {"pip", "setuptools", "wheel"}):
        if name not in locked:
            lines.append(f"  {name} {installed[name]} (not in the lock)")
        elif locked[name] != installed[name]:
            lines.append(f"  {name} {locked[name]} -> {installed[name]}")
    return lines or ["  none"]


if __name__ == "__main__":
    print("\n".join(differences(pins(Path(sys.argv[1])), pins(Path(sys.argv[2])))))
