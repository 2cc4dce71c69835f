"""The command line: `q2api accounts …` against a temporary store, and `q2api serve` as a real process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import pytest

from q2api.accounts.records import AccountStats, AccountStatus
from q2api.cli.accounts import TABLE_COLUMNS, format_table
from q2api.cli.main import build_parser
from q2api.testing.simulated_services import usage_document
from q2api.testing.simulated_upstream import SIM_CLIENT_SECRET, SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.cli import run
from tests.support.serve_process import CLIENT_KEY, clean_environment, serve
from tests.support.stores import sqlite_store

REFRESH_SECRET = "rt-NEVER-PRINT-7f3a9c1e5b"
CLIENT_SECRET = "cs-NEVER-PRINT-2d8e4b6a0c"
CLIENT_ID = "client-id-0123456789"


# -- accounts ------------------------------------------------------------------


def test_accounts_add_list_remove_round_trip(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    code, out, err = run(capsys, "accounts", "add", "--label", "work")
    assert code == 0, err
    account_id = re.search(r"Added account (\w+) \(work, social\)", out).group(1)
    assert sqlite_store(data_dir).get(account_id).refresh_token == REFRESH_SECRET

    code, listing, err = run(capsys, "accounts", "list")
    assert code == 0, err
    header, row = listing.strip().splitlines()
    assert header.split()[:4] == ["ID", "LABEL", "AUTH", "STATUS"]
    assert row.split()[:4] == [account_id, "work", "social", "active"]
    assert REFRESH_SECRET not in listing + out + err

    code, out, err = run(capsys, "accounts", "remove", "work")
    assert code == 0 and account_id in out
    assert sqlite_store(data_dir).list_views() == []

    code, out, err = run(capsys, "accounts", "remove", "work")
    assert code == 1
    assert "no account with id or label 'work'" in err


def test_accounts_add_infers_idc_from_the_client_registration_and_lists_no_secret(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    monkeypatch.setenv("Q2API_NEW_CLIENT_SECRET", CLIENT_SECRET)
    code, out, err = run(capsys, "accounts", "add", "--label", "builder", "--client-id", CLIENT_ID)
    assert code == 0, err
    assert "(builder, idc)" in out
    [stored] = sqlite_store(data_dir).accounts()
    assert (stored.auth_method, stored.client_id, stored.client_secret) == ("idc", CLIENT_ID, CLIENT_SECRET)

    code, listing, _ = run(capsys, "accounts", "list")
    assert code == 0 and "builder" in listing and "idc" in listing
    for secret in (REFRESH_SECRET, CLIENT_SECRET, CLIENT_ID):
        assert secret not in listing + out


def test_accounts_add_takes_secrets_from_flags_too(data_dir, capsys):
    code, out, err = run(
        capsys,
        "accounts",
        "add",
        "--label",
        "flags",
        "--refresh-token",
        REFRESH_SECRET,
        "--client-id",
        CLIENT_ID,
        "--client-secret",
        CLIENT_SECRET,
        "--profile-arn",
        "arn:aws:test",
    )
    assert code == 0, err
    [stored] = sqlite_store(data_dir).accounts()
    assert (stored.refresh_token, stored.client_secret, stored.profile_arn) == (
        REFRESH_SECRET,
        CLIENT_SECRET,
        "arn:aws:test",
    )
    assert REFRESH_SECRET not in out + err and CLIENT_SECRET not in out + err


def test_accounts_add_with_an_existing_label_replaces_its_credentials(data_dir, capsys, monkeypatch):
    # The re-login path: an account whose refresh token was rejected gets a fresh one, same id.
    store = sqlite_store(data_dir)
    old = store.add(auth_method="social", refresh_token="old-token", label="work")
    store.set_status(old.id, AccountStatus.NEEDS_LOGIN, "invalid_grant")
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)

    code, out, err = run(capsys, "accounts", "add", "--label", "work")
    assert code == 0, err
    assert f"Updated the credentials of account {old.id}" in out
    [stored] = store.accounts()
    assert (stored.id, stored.refresh_token, stored.status) == (old.id, REFRESH_SECRET, AccountStatus.ACTIVE)


def test_accounts_add_without_a_refresh_token_off_a_terminal_exits_2(data_dir, capsys):
    code, _out, err = run(capsys, "accounts", "add", "--label", "work")
    assert code == 2
    assert "Q2API_NEW_REFRESH_TOKEN" in err
    assert sqlite_store(data_dir).accounts() == []


def test_accounts_add_asks_for_missing_secrets_on_a_terminal(data_dir, capsys, monkeypatch):
    answers = {"refresh token": REFRESH_SECRET, "client secret": CLIENT_SECRET}
    prompts: list[str] = []

    def fake_getpass(prompt: str) -> str:
        prompts.append(prompt)
        return next(answer for what, answer in answers.items() if prompt.startswith(what))

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("getpass.getpass", fake_getpass)
    code, _out, err = run(capsys, "accounts", "add", "--label", "tty", "--client-id", CLIENT_ID)
    assert code == 0, err
    assert len(prompts) == 2
    [stored] = sqlite_store(data_dir).accounts()
    assert (stored.refresh_token, stored.client_secret) == (REFRESH_SECRET, CLIENT_SECRET)


def test_accounts_add_idc_without_a_client_id_exits_2(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    code, _, err = run(capsys, "accounts", "add", "--label", "x", "--auth-method", "idc")
    assert code == 2 and "--client-id" in err
    assert sqlite_store(data_dir).accounts() == []


def test_accounts_remove_by_id_and_refuses_an_ambiguous_label(data_dir, capsys):
    store = sqlite_store(data_dir)
    first = store.add(auth_method="social", refresh_token="t1", label="twin")
    second = store.add(auth_method="social", refresh_token="t2", label="twin")

    code, _, err = run(capsys, "accounts", "remove", "twin")
    assert code == 1 and first.id in err and second.id in err
    assert len(store.accounts()) == 2

    code, _out, _ = run(capsys, "accounts", "remove", first.id)
    assert code == 0
    assert [account.id for account in store.accounts()] == [second.id]


def test_account_table_shows_expiry_refresh_time_and_why_an_account_is_stuck(tmp_path):
    store = sqlite_store(tmp_path)
    fresh = store.add(auth_method="social", refresh_token="t1", label="fresh")
    now = time.time()
    store.save_tokens(fresh.id, access_token="a1", expires_at=now + 90 * 60)
    stuck = store.add(auth_method="social", refresh_token="t2", label="stuck")
    store.set_status(stuck.id, AccountStatus.NEEDS_LOGIN, "invalid_grant")

    stats = {fresh.id: AccountStats(requests=12, failures=1, last_error="HTTP 500", last_used_at=now)}
    lines = format_table(store.list_views(), now=now, stats=stats).splitlines()
    fresh_row = next(line for line in lines if line.startswith(fresh.id))
    stuck_row = next(line for line in lines if line.startswith(stuck.id))
    assert "12 (1 failed)" in fresh_row
    assert "(in 1 h 30 min)" in fresh_row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", fresh_row)  # refreshed at
    assert "needs_login (invalid_grant)" in stuck_row
    assert stuck_row.rstrip().endswith("-")  # never refreshed


def test_accounts_list_on_an_empty_store_says_how_accounts_get_there(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("AMAZONQ_REFRESH_TOKEN", REFRESH_SECRET)
    code, out, _ = run(capsys, "accounts", "list")
    assert code == 0
    assert "q2api accounts add" in out and "as 'env'" in out
    assert REFRESH_SECRET not in out


def test_a_bad_setting_stops_accounts_with_exit_2_and_the_message(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("Q2API_MAX_RETRIES", "many")
    code, _out, err = run(capsys, "accounts", "list")
    assert code == 2
    assert "Q2API_MAX_RETRIES must be an integer" in err


def test_accounts_list_shows_credits_of_accounts_with_a_current_token_and_never_refreshes(
    data_dir, capsys, monkeypatch
):
    with SimulatedUpstream.run_in_thread() as upstream:
        monkeypatch.setenv("AMAZONQ_ENDPOINT", upstream.url)
        store = sqlite_store(data_dir)
        current = store.add(auth_method="social", refresh_token="rt-current", label="current")
        store.save_tokens(current.id, access_token="tok-current", expires_at=time.time() + 3600)
        upstream.sim.token_accounts["tok-current"] = "rt-current"
        upstream.sim.services.usage_by_account = {"rt-current": usage_document(12.5, 50)}
        store.add(auth_method="social", refresh_token="rt-none", label="tokenless")

        code, listing, err = run(capsys, "accounts", "list")
        assert upstream.sim.refresh_calls == 0
    assert code == 0, err
    header, *rows = listing.strip().splitlines()
    column = header.index("CREDITS")
    credits = {line.split()[1]: line[column:].split()[0] for line in rows}
    assert credits == {"current": "12.5/50", "tokenless": "-"}


def test_accounts_usage_reads_each_accounts_credits(data_dir, capsys, monkeypatch):
    with SimulatedUpstream.run_in_thread() as upstream:
        monkeypatch.setenv("AMAZONQ_ENDPOINT", upstream.url)
        monkeypatch.setenv("AMAZONQ_KIRO_REFRESH_ENDPOINT", upstream.sim.kiro_refresh_url)
        sqlite_store(data_dir).add(auth_method="social", refresh_token=SIM_REFRESH_TOKEN, label="kiro")
        code, out, err = run(capsys, "accounts", "usage")
        missing, _, missing_err = run(capsys, "accounts", "usage", "nobody")
    assert code == 0, err
    header, row = out.strip().splitlines()
    assert header.split()[:4] == ["ID", "LABEL", "PLAN", "USED"]
    assert "KIRO FREE" in row and row.split()[-4:-1] == ["12.5", "50", "37.5"]
    assert SIM_REFRESH_TOKEN not in out + err
    assert missing == 1 and "nobody" in missing_err


def test_serve_rejects_a_worker_count_below_one():
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["serve", "--workers", "0"])
    assert stopped.value.code == 2


# -- serve as a real process -----------------------------------------------------


def test_the_console_script_runs_the_same_command_line():
    script = Path(sys.executable).parent / "q2api"
    if not script.exists():
        pytest.skip("the package is not installed in this interpreter's environment (pip install -e .)")
    done = subprocess.run([str(script), "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "--workers" in done.stdout and "--port" in done.stdout


def test_a_bad_setting_stops_serve_with_exit_2_and_no_traceback(tmp_path):
    env = {**clean_environment(), "Q2API_LOG_FORMAT": "xml"}
    done = subprocess.run(
        [sys.executable, "-m", "q2api", "serve", "--port", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Q2API_LOG_FORMAT must be one of text, json" in done.stderr
    assert "Traceback" not in done.stderr


def ask(base_url: str) -> anthropic.types.Message:
    client = anthropic.Anthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=0, timeout=30.0)
    return client.messages.create(
        model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "hello from the cli test"}]
    )


def test_serve_with_workers_answers_and_every_worker_logs_the_request_line_with_its_fields(tmp_path):
    with (
        SimulatedUpstream.run_in_thread() as upstream,
        serve(tmp_path, upstream.env(), client_key=CLIENT_KEY, workers=2) as server,
    ):
        status, health = server.get("/healthz")
        assert status == 200 and health["status"] == "ok"
        assert [account["id"] for account in health["accounts"]] == ["env"]

        message = ask(server.base_url)
        assert "hello from the cli test" in message.content[0].text  # the simulator's echo came through

        # The request line is written by a worker process, so its fields prove the worker's logging set-up.
        line = server.wait_for(lambda line: "POST /v1/messages" in line)
        assert re.search(r"\| INFO +\| POST /v1/messages request_id=req_\w+ model=claude-sonnet-5-5 ", line)
        assert " status=200 " in line and " stop_reason=end_turn " in line
    log = "\n".join(server.lines)
    for secret in (CLIENT_KEY, SIM_REFRESH_TOKEN, SIM_CLIENT_SECRET, "sim-access-"):
        assert secret not in log


def test_serve_json_log_format_writes_one_json_object_per_line(tmp_path):
    with (
        SimulatedUpstream.run_in_thread() as upstream,
        serve(tmp_path, upstream.env(), client_key=CLIENT_KEY, log_format="json") as server,
    ):
        ask(server.base_url)
        server.wait_for(lambda line: "POST /v1/messages" in line)
    records = [json.loads(line) for line in server.lines if line.strip()]
    assert len(records) == len([line for line in server.lines if line.strip()]) > 3
    # Flat objects: what log tools index is at the top level, not under loguru's record.extra.
    assert all({"time", "level", "message"} <= set(record) for record in records)
    [request] = [record for record in records if record["message"] == "POST /v1/messages"]
    assert request["level"] == "INFO"
    assert re.fullmatch(r"req_[0-9a-f]{24}", request["request_id"])
    assert request["status"] == 200 and request["model"] == "claude-sonnet-5-5"
    assert request["stop_reason"] == "end_turn" and request["upstream_attempts"] == 1


def test_accounts_list_help_names_every_column_the_table_prints():
    parser = build_parser()
    [commands] = [action for action in parser._actions if action.dest == "command"]
    [account_commands] = [
        action for action in commands.choices["accounts"]._actions if action.dest == "accounts_command"
    ]
    description = account_commands.choices["list"].description
    assert [column for column in TABLE_COLUMNS if column not in description] == []
    assert format_table([]).split() == [word for column in TABLE_COLUMNS for word in column.split()]
