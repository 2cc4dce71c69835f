"""Start-up faults of `q2api serve` and secret hygiene of `q2api accounts add`.

A data directory that cannot hold the store, or a database file that is not a
database, stops `q2api serve` with exit 2 and one line naming Q2API_DATA_DIR (no
traceback); an existing data directory open to others is tightened to 0700.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from q2api.accounts.store import SqliteAccountStore
from q2api.cli.main import main
from q2api.settings import ENV_VARIABLES
from q2api.store.sqlite_database import DB_FILENAME

SECRET = "rt-NEVER-PRINT-3c5e7a9b1d"


def serve_with_data_dir(tmp_path: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ENV_VARIABLES and not key.startswith(("Q2API_", "AMAZONQ_"))
    }
    env["Q2API_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "q2api", "serve", "--port", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_refused_naming_the_data_dir(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, done.stderr
    assert "Q2API_DATA_DIR=" in done.stderr and "cannot hold the account store" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_data_dir_that_is_a_file_stops_serve_with_exit_2(tmp_path) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("a file where the directory should be")
    assert_refused_naming_the_data_dir(serve_with_data_dir(tmp_path, not_a_dir))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_an_unwritable_data_dir_stops_serve_with_exit_2(tmp_path) -> None:
    read_only = tmp_path / "data"
    read_only.mkdir(mode=0o500)
    assert_refused_naming_the_data_dir(serve_with_data_dir(tmp_path, read_only))


def test_a_corrupt_database_stops_serve_with_exit_2(tmp_path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    (data_dir / DB_FILENAME).write_bytes(b"this is not a SQLite database at all, just text" * 100)
    assert_refused_naming_the_data_dir(serve_with_data_dir(tmp_path, data_dir))


def test_an_existing_data_dir_open_to_others_is_tightened_to_0700(tmp_path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    os.chmod(data_dir, 0o755)
    SqliteAccountStore(data_dir)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700


def test_a_refresh_token_on_the_command_line_gets_a_warning(tmp_path, monkeypatch, capsys) -> None:
    for variable in (*ENV_VARIABLES, "Q2API_NEW_REFRESH_TOKEN", "Q2API_NEW_CLIENT_SECRET"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("Q2API_DATA_DIR", str(tmp_path / "store"))
    assert main(["accounts", "add", "--label", "cli", "--no-verify", "--refresh-token", SECRET]) == 0
    captured = capsys.readouterr()
    assert "warning: the refresh token was given on the command line" in captured.err
    assert "Q2API_NEW_REFRESH_TOKEN" in captured.err
    assert SECRET not in captured.out + captured.err
    # Through the environment: no warning.
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", SECRET)
    assert main(["accounts", "add", "--label", "env", "--no-verify"]) == 0
    assert "warning" not in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("admin_key", ["admin-key-for-the-console-test", None])
def test_serve_says_where_the_console_is_or_how_to_turn_it_on(tmp_path, admin_key) -> None:
    import re
    import urllib.request

    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ENV_VARIABLES and not key.startswith(("Q2API_", "AMAZONQ_"))
    }
    env.update({"Q2API_DATA_DIR": str(tmp_path / "data"), "NO_PROXY": "127.0.0.1"})
    if admin_key:
        env["Q2API_ADMIN_KEY"] = admin_key
    process = subprocess.Popen(
        [sys.executable, "-m", "q2api", "serve", "--port", str(_free_port())],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if "Uvicorn running on" in line:
                break
        [console] = [line for line in lines if "console: " in line]
        if admin_key is None:
            assert "console: off (set Q2API_ADMIN_KEY" in console
            return
        url = re.search(r"console: (http://127\.0\.0\.1:\d+/console) \(sign in with Q2API_ADMIN_KEY\)", console)
        assert url, console
        with urllib.request.urlopen(url[1], timeout=10) as page:
            assert page.status == 200 and b"q2api console" in page.read()
        assert admin_key not in "".join(lines)
    finally:
        process.terminate()
        process.wait(timeout=30)
