"""`q2api keys …` as a real process: the key printed once (stdout alone), never stored or shown again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.serve_process import clean_environment


def q2api(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**clean_environment(), "Q2API_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-m", "q2api", *args], env=env, capture_output=True, text=True, timeout=60)


def test_create_prints_the_key_once_and_stores_only_its_hash(tmp_path: Path) -> None:
    created = q2api(
        tmp_path, "keys", "create", "--label", "ci-bot", "--models", "a,b", "--rpm", "10", "--expires", "30d"
    )
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("q2k_") and "\n" not in key  # stdout is the key alone: KEY=$(q2api keys create …)
    assert key not in created.stderr
    listed = q2api(tmp_path, "keys", "list")
    shown = q2api(tmp_path, "keys", "show", "ci-bot", "--json")
    assert listed.returncode == 0 and "ci-bot" in listed.stdout and "rpm=10" in listed.stdout
    document = json.loads(shown.stdout)
    assert document["models"] == ["a", "b"] and document["status"] == "active"
    for output in (listed.stdout, listed.stderr, shown.stdout):
        assert key not in output and key[10:] not in output
    stored = b"".join(path.read_bytes() for path in tmp_path.iterdir() if path.is_file())
    assert key.encode() not in stored and key[10:].encode() not in stored

    assert q2api(tmp_path, "keys", "create", "--label", "ci-bot").returncode == 1  # the label is taken
    bad = q2api(tmp_path, "keys", "create", "--label", "x", "--credits-per-day", "-2")
    assert bad.returncode == 2 and "credits_per_day" in bad.stderr
    updated = q2api(tmp_path, "keys", "update", "ci-bot", "--rpm", "none", "--tpm", "500")
    assert updated.returncode == 0 and "tpm: 500" in updated.stdout and "rpm: -" in updated.stdout
    assert q2api(tmp_path, "keys", "revoke", "ci-bot").returncode == 0
    assert "revoked" in q2api(tmp_path, "keys", "list").stdout
    assert q2api(tmp_path, "keys", "show", "nobody").returncode == 1


def test_list_shows_no_spend_rather_than_zero_when_the_counters_do_not_answer(tmp_path: Path) -> None:
    assert q2api(tmp_path, "keys", "create", "--label", "ci-bot", "--credits-per-day", "5").returncode == 0
    env = {**clean_environment(), "Q2API_DATA_DIR": str(tmp_path), "Q2API_REDIS_URL": "redis://127.0.0.1:1/0"}
    listed = subprocess.run(
        [sys.executable, "-m", "q2api", "keys", "list"], env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "ci-bot" in line)
    assert row.split()[-1] == "-" and "0.00" not in row  # unknown, not "nothing spent"
