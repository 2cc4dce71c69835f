"""The command line with a shared store: refused without a key, accounts copied between stores."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from q2api.accounts.records import AccountStatus
from q2api.cli.main import main
from q2api.settings import ENV_VARIABLES
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, scratch_database_url
from tests.support.serve_process import clean_environment
from tests.support.stores import BlockingStore, sqlite_store

PASSWORD = "pw-NEVER-PRINTED-51c2"


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in ENV_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # no `.env`
    monkeypatch.setenv("Q2API_SECRET_KEY", TEST_SECRET_KEY)
    return tmp_path


@pytest.fixture(params=SHARED_KINDS)
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_database_url(request.param) as url:
        yield url


def test_serve_refuses_a_shared_store_without_a_key(tmp_path: Path) -> None:
    env = clean_environment()
    env["Q2API_DATABASE_URL"] = f"postgresql://q2api:{PASSWORD}@127.0.0.1:1/q2api"
    result = subprocess.run(
        [sys.executable, "-m", "q2api", "serve", "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Q2API_SECRET_KEY" in result.stderr and "Q2API_DATABASE_URL" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout
    assert "postgresql://q2api:***@127.0.0.1:1/q2api" in result.stderr


def test_serve_refuses_a_malformed_key(tmp_path: Path) -> None:
    env = clean_environment()
    env |= {"Q2API_DATABASE_URL": "mysql://root@127.0.0.1:1/q2api", "Q2API_SECRET_KEY": "not-a-fernet-key"}
    result = subprocess.run(
        [sys.executable, "-m", "q2api", "serve"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "Q2API_SECRET_KEY must be Fernet keys" in result.stderr and "not-a-fernet-key" not in result.stderr


def test_accounts_move_from_sqlite_to_a_shared_store_and_back(
    isolated: Path, database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = isolated / "data"
    sqlite = sqlite_store(data_dir)
    work = sqlite.add(auth_method="social", refresh_token="refresh-SECRET-1", label="work")
    sqlite.save_tokens(work.id, access_token="access-SECRET", expires_at=2e9, refresh_token="rotated-SECRET")
    spare = sqlite.add(auth_method="social", refresh_token="refresh-SECRET-2", label="spare")
    sqlite.update(spare.id, enabled=False)
    sqlite.set_status(spare.id, AccountStatus.NEEDS_LOGIN, "suspended")

    assert main(["accounts", "copy", "--from", str(data_dir), "--to", database_url]) == 0
    captured = capsys.readouterr()
    assert "2 account(s) copied, 0 skipped" in captured.out
    shared = BlockingStore.open(database_url, data_dir, TEST_SECRET_KEY)
    assert shared.accounts() == sqlite.accounts()  # whole: rotated tokens, switch and login state

    # Again: nothing is overwritten (the target's tokens may be newer) unless asked.
    shared.save_tokens(work.id, access_token="newer", expires_at=3e9, refresh_token="rotated-again-SECRET")
    assert main(["accounts", "copy", "--from", str(data_dir), "--to", database_url]) == 0
    assert "0 account(s) copied, 2 skipped" in capsys.readouterr().out
    assert shared.get(work.id).refresh_token == "rotated-again-SECRET"

    # And back into a fresh data directory, with the shared store as the configured one.
    monkeypatch.setenv("Q2API_DATABASE_URL", database_url)
    assert main(["accounts", "copy", "--from", database_url, "--to", str(isolated / "back")]) == 0
    assert main(["accounts", "list"]) == 0
    captured = capsys.readouterr()
    assert sqlite_store(isolated / "back").get(work.id).refresh_token == "rotated-again-SECRET"
    assert "work" in captured.out and "spare" in captured.out
    assert "SECRET" not in captured.out + captured.err
    shared.close()


def test_copy_refuses_one_store_as_both_ends(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accounts", "copy", "--from", str(isolated / "data"), "--to", str(isolated / "data")]) == 2
    assert "same store" in capsys.readouterr().err


def test_an_unreachable_database_is_a_clear_error_without_the_password(
    isolated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("Q2API_DATABASE_URL", f"postgresql://q2api:{PASSWORD}@127.0.0.1:1/q2api")
    assert main(["accounts", "list"]) == 1
    err = capsys.readouterr().err
    assert "cannot use the store: the shared store postgresql://q2api:***@127.0.0.1:1/q2api failed" in err
    assert PASSWORD not in err


def test_serve_and_the_cli_with_another_key_than_the_stores_say_so_in_one_line(
    isolated: Path, database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BlockingStore.open(database_url, isolated, TEST_SECRET_KEY)
    store.add(auth_method="idc", refresh_token="r-SECRET", client_id="c", client_secret="s-SECRET", label="one")
    store.close()
    other_key = Fernet.generate_key().decode()
    env = clean_environment() | {"Q2API_DATABASE_URL": database_url, "Q2API_SECRET_KEY": other_key}
    result = subprocess.run(
        [sys.executable, "-m", "q2api", "serve", "--port", "0"],
        cwd=isolated,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("q2api: ") and "does not decrypt with Q2API_SECRET_KEY" in line
    assert other_key not in result.stderr and TEST_SECRET_KEY not in result.stderr

    monkeypatch.setenv("Q2API_DATABASE_URL", database_url)
    monkeypatch.setenv("Q2API_SECRET_KEY", other_key)
    assert main(["accounts", "list"]) != 0
    err = capsys.readouterr().err
    assert "does not decrypt with Q2API_SECRET_KEY" in err and "Traceback" not in err
