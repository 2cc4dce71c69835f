"""`q2api probe` through the command line, against the simulated Amazon Q on loopback."""

from __future__ import annotations

import datetime

import orjson
import pytest

from q2api.probe.steps import DEFAULT_BUDGET
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SimulatedUpstream
from tests.support.cli import run

TOKEN_PATHS = {"/token", "/refreshToken"}


@pytest.fixture
def env_account(data_dir, token_service: SimulatedUpstream, monkeypatch):
    """The environment's IdC account, served by the simulator."""
    monkeypatch.setenv("AMAZONQ_REFRESH_TOKEN", "cli-probe-refresh")
    monkeypatch.setenv("AMAZONQ_CLIENT_ID", SIM_CLIENT_ID)
    monkeypatch.setenv("AMAZONQ_CLIENT_SECRET", SIM_CLIENT_SECRET)
    token_service.usage_frames = True
    return token_service


def upstream_calls(sim: SimulatedUpstream) -> int:
    return sum(count for path, count in sim.calls.items() if path not in TOKEN_PATHS)


def test_probe_writes_the_report_and_prints_the_summary_and_the_comparison(env_account, tmp_path, capsys):
    output = tmp_path / "report.json"
    code, out, err = run(capsys, "probe", "--output", str(output), "--compare")
    assert code == 0, err
    document = orjson.loads(output.read_bytes())
    assert document["format"] == "q2api-probe/1"
    [account] = document["accounts"]
    assert account["login"] == "idc" and account["account"] == "env"
    assert [step["step"] for step in account["steps"]] == [
        "profiles", "catalogue", "credits", "hosts", "text", "tool_call", "thinking", "cache", "web_search",
    ]  # fmt: skip
    assert {row["verdict"] for row in document["comparison"]} <= {"same", "not_observed"}
    assert upstream_calls(env_account) == account["calls"] <= DEFAULT_BUDGET
    assert "ACCOUNT" in out and "STEP" in out and "environment" in out  # the label, on the terminal only
    assert "FACT" in out and "VERDICT" in out and "runtime_host.takes_idc_token" in out
    assert "[4/9] hosts: done" in out  # a progress line per step
    assert f"The report is in {output}" in out


def test_the_report_goes_to_a_dated_file_in_the_working_directory(env_account, tmp_path, capsys):
    code, _, err = run(capsys, "probe")
    assert code == 0, err
    assert (tmp_path / f"probe-{datetime.date.today().isoformat()}.json").is_file()


def test_limits_without_a_terminal_and_without_yes_send_nothing(env_account, capsys):
    code, out, err = run(capsys, "probe", "--limits")
    assert code == 1
    assert "up to 28 more requests per account" in out and "add --yes" in err
    assert "nothing was sent" in out
    assert upstream_calls(env_account) == 0 and env_account.refresh_calls == 0


def test_limits_with_yes_run_after_saying_what_they_cost(env_account, tmp_path, capsys):
    env_account.body_limit = 300_000
    env_account.history_cap = 198
    output = tmp_path / "limits.json"
    code, out, err = run(capsys, "probe", "--limits", "--yes", "--output", str(output))
    assert code == 0, err
    assert "up to 28 more requests per account" in out
    steps = {step["step"]: step for step in orjson.loads(output.read_bytes())["accounts"][0]["steps"]}
    assert steps["history_cap"]["largest_accepted_messages"] == 198
    assert steps["payload_limit"]["smallest_refused_bytes"] > 300_000


@pytest.mark.parametrize(
    ("argv", "message"),
    [(("--yes",), "--yes only goes with --limits"), (("--account", "nobody"), "no account 'nobody'")],
)
def test_usage_errors_exit_2(env_account, capsys, argv, message):
    code, _, err = run(capsys, "probe", *argv)
    assert code == 2 and message in err
    assert upstream_calls(env_account) == 0


def test_without_an_account_nothing_is_sent(data_dir, token_service, capsys):
    code, out, _ = run(capsys, "probe")
    assert code == 1 and "no enabled account to probe" in out
