"""`python -m q2api.settings --write-docs | --check`: the files generated from the settings table.

`--write-docs` writes docs/configuration.md, .env.example and the README's
short list; `--check` writes nothing and exits 1 naming each stale file (for CI).
Both work on the repository this package is part of, or on `--root`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from q2api.settings.reference import GENERATED_BY, generated_files, stale_files

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m q2api.settings", description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write-docs", action="store_true", help="write the generated files")
    action.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    parser.add_argument("--root", type=Path, default=REPOSITORY_ROOT, help="the repository (default: %(default)s)")
    args = parser.parse_args(argv)
    root: Path = args.root
    if args.check:
        stale = stale_files(root)
        for stale_path in stale:
            print(f"{stale_path} is stale: run `{GENERATED_BY}`", file=sys.stderr)
        return 1 if stale else 0
    for generated in generated_files(root):
        path = root / generated.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != generated.text:
            path.write_text(generated.text, encoding="utf-8")
            print(f"wrote {generated.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
