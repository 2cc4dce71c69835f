"""`q2api --version`, `q2api` alone, and the warning about misspelt settings."""

from __future__ import annotations

import subprocess
import sys

import pytest

from q2api import __version__
from q2api.cli.env_check import unknown_variables
from q2api.cli.main import main
from tests.support.cli import run
from tests.support.serve_process import clean_environment


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"q2api {__version__}"


def test_q2api_alone_prints_the_help_and_exits_0(capsys):
    code, out, err = run(capsys)
    assert code == 0 and not err
    assert out.startswith("usage: q2api")
    for command in ("serve", "demo", "accounts"):
        assert command in out


@pytest.mark.parametrize(("group", "commands"), [("accounts", ("list", "add", "import")), ("captures", ("list", "rm"))])
def test_a_command_group_alone_prints_its_help_and_exits_0(capsys, group, commands):
    # Not argparse's "the following arguments are required: accounts_command" (an internal name).
    code, out, err = run(capsys, group)
    assert code == 0 and not err
    assert out.startswith(f"usage: q2api {group}")
    assert "_command" not in out
    for command in commands:
        assert command in out


def test_login_help_says_a_login_without_a_label_never_replaces_an_account(capsys):
    with pytest.raises(SystemExit):
        main(["login", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "never replaces an account" in out
    assert "an existing label is replaced)" not in out


def test_the_console_entry_point_alone_prints_the_help_too(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "q2api"],
        env=clean_environment(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "usage: q2api" in done.stdout


def test_an_unknown_command_is_still_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["serv"])
    assert stopped.value.code == 2
    assert "invalid choice: 'serv'" in capsys.readouterr().err


def test_misspelt_variables_get_their_closest_known_name(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("AMAZONQ_CLIENT_SECRT=cs-NEVER-PRINT\nQ2API_API_KEYS=k\n")
    env = {
        "Q2API_LOG_LEVL": "DEBUG",
        "q2api_max_retries": "2",  # wrong case: q2api reads upper-case names only
        "AMAZONQ_WHATEVER_THIS_IS": "1",
        "Q2API_NEW_REFRESH_TOKEN": "known to `accounts add`",
        "Q2API_LOG_LEVEL": "INFO",
        "HOME": "/home/u",
    }
    found = unknown_variables(env, env_file, known=["Q2API_NEW_REFRESH_TOKEN"])
    warnings = [item.warning() for item in found]
    assert warnings == [
        "unknown setting AMAZONQ_WHATEVER_THIS_IS in the environment is ignored",
        "unknown setting Q2API_LOG_LEVL in the environment is ignored; did you mean Q2API_LOG_LEVEL?",
        "unknown setting q2api_max_retries in the environment is ignored; did you mean Q2API_MAX_RETRIES?",
        f"unknown setting AMAZONQ_CLIENT_SECRT in {env_file} is ignored; did you mean AMAZONQ_CLIENT_SECRET?",
    ]
    assert not any("NEVER-PRINT" in warning or "DEBUG" in warning for warning in warnings)
