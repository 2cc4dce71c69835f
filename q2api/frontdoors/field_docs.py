"""The field tables of the three doors, printed into docs/clients.md ("Every request field").

    python -m q2api.frontdoors.field_docs --write   # refresh the page's tables from the code
    python -m q2api.frontdoors.field_docs --check   # exit 1 if the page is out of date (tests/test_docs.py does too)

Each table stands between `<!-- field-table: DOOR -->` and `<!-- /field-table -->`; the rest of the
page is written by hand.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from q2api.frontdoors.chat.fields import CHAT_FIELDS
from q2api.frontdoors.claude.fields import CLAUDE_FIELDS
from q2api.frontdoors.field_table import FieldTable
from q2api.frontdoors.responses.fields import RESPONSES_FIELDS

TABLES: tuple[FieldTable, ...] = (CLAUDE_FIELDS, CHAT_FIELDS, RESPONSES_FIELDS)
PAGE = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
# A marked block: its opening line, what stands in it now (nothing, or a table and a blank line), its closing line.
_BLOCK = re.compile(r"(<!-- field-table: (?P<door>\S+) -->\n)(?:(?!<!--).*?\n)?(<!-- /field-table -->)", re.DOTALL)


def with_tables(page: str) -> str:
    """`page` with every marked table replaced by the current one of its door."""
    by_door = {table.door: table for table in TABLES}

    def table_of(match: re.Match[str]) -> str:
        table = by_door[match["door"]]
        return f"{match[1]}\n{table.markdown()}\n\n{match[3]}"

    return _BLOCK.sub(table_of, page)


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    current = with_tables(page)
    if argv == ["--write"]:
        PAGE.write_text(current, encoding="utf-8")
        return 0
    if argv == ["--check"]:
        if current != page:
            print(f"{PAGE} is out of date: run python -m q2api.frontdoors.field_docs --write", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
