"""Stored and imported text reaches the terminal and the start-up log escaped (issue 26, item 4).

A label comes from whoever added the account, an imported provider name from a file on disk:
either may hold ESC sequences (which drive the terminal: retitle it, clear it, hide what
follows), newlines and NULs (which forge lines) or bidirectional controls (which reorder what
is shown). The command line and the start-up log show them through q2api.log_text.one_line.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from q2api.accounts.store import SqliteAccountStore
from q2api.server.readiness import log_store_contents
from q2api.store.sqlite_database import DB_FILENAME
from tests.support import credential_files as files
from tests.support.cli import run
from tests.support.gateway_harness import capture_logs

HOSTILE = "ops\x1b]0;pwned\x07\x1b[2J\nFORGED line\x00 \u202egnp.exe\u2066"
RAW_CONTROLS = ("\x1b", "\x07", "\x00", "\u202e", "\u2066")
# A label given to q2api is refused with a NUL in it (no store can keep one: issue 26, item 6); the
# rest of the hostile text is accepted, and shown escaped.
STORABLE_HOSTILE = HOSTILE.replace("\x00", "")


def assert_shown_escaped(text: str) -> None:
    for control in RAW_CONTROLS:
        assert control not in text, repr(text)
    assert "FORGED line" not in text.replace("\\nFORGED line", "")  # only ever after an escaped newline
    assert "ops\\x1b]0;pwned\\x07\\x1b[2J\\nFORGED line\\x00 \\u202egnp.exe\\u2066" in text


def relabel_every_account(data_dir: Path, label: str) -> None:
    """Write the label as another tool (or an older release) might have: straight into the database."""
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        db.execute("UPDATE q2api_accounts SET label = ?", (label,))


@pytest.fixture
def hostile_store(data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", "rt-NEVER-PRINT-5d1c")
    assert run(capsys, "accounts", "add", "--label", "plain", "--no-verify")[0] == 0
    relabel_every_account(data_dir, HOSTILE)
    return data_dir


def test_accounts_list_shows_a_hostile_label_escaped_on_one_row(hostile_store: Path, capsys) -> None:
    code, out, err = run(capsys, "accounts", "list")
    assert code == 0, err
    assert len(out.strip().splitlines()) == 2  # the header and one row
    assert_shown_escaped(out)


@pytest.mark.parametrize("command", ["disable", "enable", "remove"])
def test_commands_naming_an_account_show_its_label_escaped(hostile_store: Path, capsys, command: str) -> None:
    code, out, err = run(capsys, "accounts", command, HOSTILE)
    assert code == 0, err
    assert_shown_escaped(out)


def test_accounts_import_shows_the_provider_and_label_from_the_files_escaped(data_dir: Path, tmp_path, capsys) -> None:
    cache = files.kiro_ide_social(tmp_path / "cache", provider=HOSTILE)
    code, out, err = run(capsys, "accounts", "import", "--kiro-ide", str(cache), "--label", STORABLE_HOSTILE)
    assert code == 0, err
    assert out.count("\n") == 3  # the store, the one account, the closing line
    assert out.count("ops\\x1b]0;pwned") == 2  # label and provider, both escaped
    assert_shown_escaped(out)


def test_the_start_up_log_names_each_account_on_one_escaped_line(hostile_store: Path) -> None:
    store = SqliteAccountStore(hostile_store)
    with capture_logs() as logs:
        asyncio.run(log_store_contents(store))
    (account_line,) = [
        line.message for line in logs.lines if line.message.startswith("account ") and "store" not in line.message
    ]
    assert "\n" not in account_line
    assert_shown_escaped(account_line)
