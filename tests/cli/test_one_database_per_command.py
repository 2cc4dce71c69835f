"""Each `q2api` command opens the store's database once (one engine, one pool), as the gateway does:
a second opening of the SQLite file in one process is a second pool for nothing (issue 30, item 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from q2api.store.sqlite_database import SqliteDatabase
from tests.support import credential_files
from tests.support.cli import run


@pytest.fixture
def openings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The SQLite files opened (a database object made) while the test runs."""
    opened: list[Path] = []
    real_init = SqliteDatabase.__init__

    def recording_init(self: SqliteDatabase, path: Path, *, busy_timeout: float) -> None:
        opened.append(path)
        real_init(self, path, busy_timeout=busy_timeout)

    monkeypatch.setattr(SqliteDatabase, "__init__", recording_init)
    yield opened


@pytest.mark.parametrize(
    "command",
    [
        ("keys", "create", "--label", "one"),
        ("keys", "list"),
        ("usage", "--by", "key"),
        ("accounts", "list"),
        ("accounts", "import", "--kiro-ide", "{cache}"),
    ],
)
def test_a_command_opens_the_store_once(
    command: tuple[str, ...], data_dir: Path, tmp_path: Path, openings: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cache = credential_files.kiro_ide_social(tmp_path / "cache")
    argv = [part.format(cache=cache) for part in command]
    code, _out, err = run(capsys, *argv)
    assert code == 0, err
    assert openings == [data_dir / "q2api.sqlite3"]
