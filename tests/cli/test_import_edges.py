"""`accounts import` on files that are not login files, and an out-of-range expiry on the listings.

Before: `/dev/zero` or a FIFO named as Kiro IDE's token file was read forever, and one account whose
imported `expiresAt` was 1e20 made `accounts list` and the admin accounts list fail for every account.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from q2api.accounts.kiro_import import KIRO_IDE_TOKEN_FILE, MAX_FILE_BYTES
from q2api.accounts.store import SqliteAccountStore
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support import credential_files as files
from tests.support.cli import run
from tests.support.gateway_harness import ADMIN_KEY, gateway_settings
from tests.support.serve_process import clean_environment
from tests.support.stores import sqlite_store

HANG_GUARD = 30.0


def import_from(data_dir: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    # A process with a bound: the failure before the fix is a read that never ends (and eats memory).
    env = clean_environment() | {"Q2API_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-m", "q2api", "accounts", "import", "--kiro-ide", str(cache)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD, cwd=data_dir.parent)


@pytest.mark.parametrize("kind", ["device", "fifo", "huge"])
def test_a_token_file_that_is_no_regular_file_or_too_big_is_refused_not_read_forever(kind, data_dir, tmp_path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    token_file = cache / KIRO_IDE_TOKEN_FILE
    if kind == "device":
        token_file.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(token_file)
    else:
        token_file.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    done = import_from(data_dir, cache)
    assert done.returncode != 0
    expected = f"larger than {MAX_FILE_BYTES} bytes" if kind == "huge" else "not a regular file"
    assert f"{token_file}: {expected}" in done.stdout + done.stderr
    assert sqlite_store(data_dir).accounts() == []


@pytest.mark.parametrize("expires_at", [1e20, -5, "soon"])
def test_an_imported_expiry_out_of_range_is_a_finding_naming_the_field(expires_at, data_dir, tmp_path, capsys) -> None:
    cache = files.kiro_ide_social(tmp_path / "cache", expiresAt=expires_at)
    code, out, err = run(capsys, "accounts", "import", "--kiro-ide", str(cache))
    assert code != 0
    assert "expiresAt" in out + err
    assert files.IDE_ACCESS not in out + err


ODD_EXPIRIES = [1e20, -1e20]  # (SQLite stores a NaN as NULL: unknown)


@pytest.mark.parametrize("expires_at", ODD_EXPIRIES)
def test_one_stored_expiry_out_of_range_breaks_no_cli_listing(expires_at, data_dir, capsys) -> None:
    store = sqlite_store(data_dir)
    store.add(auth_method="social", refresh_token="r-odd", label="odd", access_token="a-odd", expires_at=expires_at)
    store.add(auth_method="social", refresh_token="r-fine", label="fine")
    code, out, err = run(capsys, "accounts", "list")
    assert code == 0, err
    assert "odd" in out and "fine" in out and "invalid" in out


@pytest.mark.parametrize("expires_at", ODD_EXPIRIES)
async def test_one_stored_expiry_out_of_range_breaks_no_admin_listing(expires_at, tmp_path) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.add(
        auth_method="social", refresh_token="r-odd", label="odd", access_token="a-odd", expires_at=expires_at
    )
    async with SimulatedUpstream() as sim:
        settings = gateway_settings(sim, tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY)
        async with running_gateway(settings) as url, httpx2.AsyncClient(base_url=url, timeout=HANG_GUARD) as http:
            reply = await http.get("/admin/api/accounts", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert reply.status_code == 200, reply.text
    listed = {account["label"]: account for account in reply.json()["accounts"]}
    assert "environment" in listed
    if expires_at > 0:  # (an expired one was refreshed at start-up: its expiry is a real one by now)
        assert listed["odd"]["token_expires_at"] is None
