"""The settings table is the one declaration: the loader, `serve` flags, typo check and generated files follow it.

The generated files (docs/configuration.md, .env.example, the README's short
list) must be what `python -m q2api.settings --write-docs` writes from the
table now, so CI fails on a stale copy; every variable is documented; a typo
of any name q2api reads gets a did-you-mean; secrets stay out of the repr and
out of the generated defaults; deprecated variables still work, with a warning.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from q2api.cli.env_check import deprecated_variables, unknown_variables
from q2api.cli.main import build_parser
from q2api.settings import (
    COMMAND_INPUTS,
    DEPRECATED_VARIABLES,
    ENV_VARIABLES,
    READ_VARIABLES,
    SECRET_FIELDS,
    VARIABLES,
    Group,
    Settings,
    SettingsError,
    load_settings,
)
from q2api.settings.__main__ import main as settings_main
from q2api.settings.declaration import setting
from q2api.settings.parsers import Text
from q2api.settings.reference import COMMON_VARIABLES, README_END, README_START, stale_files
from tests.support.serve_process import clean_environment

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs" / "configuration.md").read_text()
ENV_EXAMPLE = (ROOT / ".env.example").read_text()
README = (ROOT / "README.md").read_text()


def section(markdown: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    level = heading.split(" ", maxsplit=1)[0]
    start = markdown.index(heading + "\n")
    following = re.compile(rf"^#{{1,{len(level)}}} ", re.MULTILINE)
    end = following.search(markdown, start + len(heading))
    return markdown[start : end.start() if end else len(markdown)]


# -- the generated files are current --------------------------------------------------------


def test_the_committed_generated_files_are_what_the_table_gives():
    assert stale_files(ROOT) == [], "run `python -m q2api.settings --write-docs` and commit the result"


def test_the_check_command_passes_on_the_repository_as_ci_runs_it():
    done = subprocess.run(
        [sys.executable, "-m", "q2api.settings", "--check"],
        env=clean_environment(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_check_fails_on_a_stale_copy_and_write_docs_mends_it(tmp_path, capsys):
    for name in ("README.md", ".env.example", "docs/configuration.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".env.example").write_text(ENV_EXAMPLE.replace("Q2API_MAX_RETRIES=3", "Q2API_MAX_RETRIES=4"))
    (tmp_path / "docs" / "configuration.md").unlink()
    assert settings_main(["--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert ".env.example is stale" in err and "docs/configuration.md is stale" in err
    assert "README.md" not in err
    assert settings_main(["--write-docs", "--root", str(tmp_path)]) == 0
    assert settings_main(["--check", "--root", str(tmp_path)]) == 0
    assert (tmp_path / ".env.example").read_text() == ENV_EXAMPLE


def test_the_readme_keeps_only_the_common_variables_and_links_the_reference():
    block = README[README.index(README_START) : README.index(README_END)]
    assert [name for name in READ_VARIABLES if f"`{name}`" in block] == [
        name for name in READ_VARIABLES if name in COMMON_VARIABLES
    ]
    configuration = section(README, "## Configuration")
    assert "(docs/configuration.md)" in configuration
    assert len(re.findall(r"^\| `", configuration, re.MULTILINE)) == len(COMMON_VARIABLES)  # no second table


# -- every variable is declared once and documented -----------------------------------------------


def test_every_settings_field_is_a_declared_variable():
    declared = {variable.field for variable in VARIABLES}
    assert declared == {field.name for field in dataclasses.fields(Settings)}
    names = [variable.name for variable in VARIABLES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("variable", VARIABLES, ids=lambda variable: variable.name)
def test_every_variable_is_documented(variable):
    assert variable.description and not variable.description.endswith(" ")
    heading = f"### `{variable.name}`"
    documented = section(DOCS, heading)
    assert " ".join(variable.description.split()) in documented
    assert ("Default: empty" if not variable.default_text else f"Default: `{variable.default_text}`") in documented
    if variable.deprecated:
        assert heading in section(DOCS, "## Deprecated variables")
        assert f"\n{variable.name}=" not in ENV_EXAMPLE  # a new configuration does not start with it
    else:
        assert heading in section(DOCS, f"## {variable.group.title}")
        assert f"\n{variable.name}={variable.default_text}\n" in ENV_EXAMPLE


def test_every_group_has_current_variables_and_every_command_input_is_documented():
    for group in Group:
        assert any(variable.group is group and not variable.deprecated for variable in VARIABLES), group
    for command_input in COMMAND_INPUTS:
        assert f"### `{command_input.name}`" in section(DOCS, "## Read by commands")


def test_the_env_example_loads_to_exactly_the_defaults(tmp_path):
    """Each default written in .env.example parses back to the table's default."""
    assert load_settings({}, env_file=ROOT / ".env.example") == Settings()
    example_names = re.findall(r"^([A-Z0-9_]+)=", ENV_EXAMPLE, re.MULTILINE)
    assert example_names == list(ENV_VARIABLES)


def test_serve_has_a_flag_for_each_variable_the_table_marks_and_it_sets_that_variable():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    flags = {option: action.dest for action in serve._actions for option in action.option_strings}
    marked = [variable for variable in VARIABLES if variable.flag]
    # Besides the table's flags, only those that are no setting: no flag defined twice.
    assert flags == {
        "-h": "help",
        "--help": "help",
        "--host": "host",
        "--port": "port",
        "--workers": "workers",
        **{variable.flag: variable.field for variable in marked},
    }
    assert [variable.name for variable in marked] == [
        "Q2API_MAX_HEADER_BYTES",
        "Q2API_MAX_HEADERS",
        "Q2API_HEADER_TIMEOUT",
        "Q2API_BODY_TIMEOUT",
        "Q2API_KEEP_ALIVE_TIMEOUT",
        "Q2API_MAX_CONNECTIONS",
    ]


# -- typos -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("Q2API_MAX_RETRIS", "Q2API_MAX_RETRIES"),  # the Q2API_ family
        ("AMAZONQ_ENDPIONT", "AMAZONQ_ENDPOINT"),  # the AMAZONQ_ family
        ("DEBUG_MESAGE_CONVERSION", "DEBUG_MESSAGE_CONVERSION"),  # a name outside the families
        ("debug_message_conversion", "DEBUG_MESSAGE_CONVERSION"),  # q2api reads upper-case names only
        ("Q2PI_LOG_LEVEL", "Q2API_LOG_LEVEL"),  # the prefix itself misspelt
        ("Q2API_NEW_REFRESH_TOKN", "Q2API_NEW_REFRESH_TOKEN"),  # a command's input
        ("AMAZONQ_AUTH_METHD", "AMAZONQ_AUTH_METHOD"),  # a deprecated setting is still a known name
        ("Q2API_API_KEY", "Q2API_API_KEYS"),  # one slip in the family, not AMAZONQ_API_KEY's exact stem
    ],
)
def test_a_typo_in_each_family_gets_a_did_you_mean(typo, meant):
    [found] = unknown_variables({typo: "secret-VALUE"}, None)
    assert found.warning() == f"unknown setting {typo} in the environment is ignored; did you mean {meant}?"


def _one_edit(name: str, kind: str, at: int) -> str:
    at %= len(name)
    if kind == "delete":
        return name[:at] + name[at + 1 :]
    if kind == "double":
        return name[:at] + name[at] + name[at:]
    if kind == "swap" and at + 1 < len(name):
        return name[:at] + name[at + 1] + name[at] + name[at + 2 :]
    return name[:at] + ("X" if name[at] != "X" else "Y") + name[at + 1 :]


def test_every_single_edit_of_every_name_q2api_reads_is_caught_and_named():
    # Every slip, not a sample: a sample once found `Q2API_API_KEY` named `AMAZONQ_API_KEY` (an exact stem
    # in the other family) rather than the one-letter-off `Q2API_API_KEYS`, after many runs that missed it.
    misnamed = []
    for name in READ_VARIABLES:
        for kind in ("delete", "double", "swap", "replace"):
            for at in range(len(name)):
                typo = _one_edit(name, kind, at)
                if typo in READ_VARIABLES or typo == name:
                    continue
                found = [item.suggestion for item in unknown_variables({typo: "1"}, None)]
                if found != [name]:
                    misnamed.append((typo, name, found))
    assert misnamed == []


def test_other_programs_variables_are_left_alone():
    env = dict.fromkeys(
        ("PATH", "HOME", "DEBUG", "DEBUG_MODE", "AWS_REGION", "AWS_PROFILE", "HTTPS_PROXY", "NO_PROXY"), "1"
    )
    env.update(dict.fromkeys(("PYTHONPATH", "UVICORN_PORT", "LOG_LEVEL", "LOG_FORMAT", "DEBUG_LEVEL"), "1"))
    assert unknown_variables(env, None) == []


# -- secrets ----------------------------------------------------------------------------------


def test_the_secret_fields_are_at_least_those_of_before():
    assert {"api_keys", "refresh_token", "client_secret", "access_token", "admin_key", "secret_key"} <= SECRET_FIELDS


def test_no_secret_value_reaches_the_repr_whatever_secret_is_set():
    key = Fernet.generate_key().decode()
    values = {
        "Q2API_DATABASE_URL": "postgresql://q2api:pw-SECRET-DB@db:5432/q2api",
        "Q2API_REDIS_URL": "redis://default:pw-SECRET-REDIS@redis:6379/0",
        "Q2API_SECRET_KEY": key,
        "AMAZONQ_PROXY": "socks5://user:pw-SECRET-PROXY@proxy.lan:1080",
    }
    for variable in VARIABLES:
        if variable.secret and variable.name not in values:
            values[variable.name] = f"SECRET-{variable.name}"
    # A Kiro API key is an environment account of its own (not beside a refresh token): its own load.
    api_key = values.pop("AMAZONQ_API_KEY")
    settings = load_settings({**values, "AMAZONQ_CLIENT_ID": "visible-client-id"}, env_file=None)
    key_settings = load_settings({"AMAZONQ_API_KEY": api_key}, env_file=None)
    for variable in VARIABLES:
        if variable.secret:
            chosen = key_settings if variable.name == "AMAZONQ_API_KEY" else settings
            assert getattr(chosen, variable.field), variable.name  # the value itself is there
    shown = repr(settings) + repr(key_settings)
    assert "SECRET" not in shown and key not in shown
    assert "visible-client-id" in shown  # only the secrets are masked


@pytest.mark.parametrize("variable", [v for v in VARIABLES if v.secret], ids=lambda variable: variable.name)
def test_a_secret_has_no_default_in_the_generated_files(variable):
    assert variable.default_text == ""
    assert "Default: empty" in section(DOCS, f"### `{variable.name}`")
    assert "**Secret**" in section(DOCS, f"### `{variable.name}`")
    assert f"\n{variable.name}=\n" in ENV_EXAMPLE


def test_a_secret_cannot_be_declared_with_a_default():
    with pytest.raises(ValueError, match="Q2API_EXAMPLE: a secret has no default"):
        setting("Q2API_EXAMPLE", Text(), default="abc", group=Group.ADMIN, description="x", secret=True)


# -- deprecated variables ---------------------------------------------------------------------------


def test_deprecated_variables_still_work_and_are_warned_about(tmp_path):
    assert set(DEPRECATED_VARIABLES) == {"AMAZONQ_AUTH_METHOD", "Q2API_CONNECT_TIMEOUT", "Q2API_MODELS_REFRESH_SECONDS"}
    env_file = tmp_path / ".env"
    env_file.write_text("Q2API_MODELS_REFRESH_SECONDS=60\n")
    env = {"Q2API_CONNECT_TIMEOUT": "3", "Q2API_LOG_LEVEL": "INFO"}
    settings = load_settings(env, env_file=env_file)
    assert (settings.connect_timeout, settings.models_refresh_seconds) == (3.0, 60.0)  # still honoured
    warnings = [notice.warning() for notice in deprecated_variables(env, env_file)]
    assert warnings == [
        "setting Q2API_CONNECT_TIMEOUT in the environment is deprecated and will be removed: "
        + DEPRECATED_VARIABLES["Q2API_CONNECT_TIMEOUT"],
        f"setting Q2API_MODELS_REFRESH_SECONDS in {env_file} is deprecated and will be removed: "
        + DEPRECATED_VARIABLES["Q2API_MODELS_REFRESH_SECONDS"],
    ]
    assert "60" not in "".join(warnings) and unknown_variables(env, env_file) == []
    assert "fixed 10 seconds" in warnings[0]  # says what replaces it


def test_without_auth_method_the_client_registration_decides_as_before():
    social = load_settings({"AMAZONQ_REFRESH_TOKEN": "r"}, env_file=None)
    idc = load_settings(
        {"AMAZONQ_REFRESH_TOKEN": "r", "AMAZONQ_CLIENT_ID": "c", "AMAZONQ_CLIENT_SECRET": "s"}, env_file=None
    )
    assert (social.auth_method, idc.auth_method) == ("social", "idc")


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("Q2API_API_KESY", "Q2API_API_KEYS"),  # its own family first, though AMAZONQ_API_KEY's stem is nearer
        ("AMAZONQ_API_KYE", "AMAZONQ_API_KEY"),
        ("Q2API_REFRESH_TOKEN", "AMAZONQ_REFRESH_TOKEN"),  # a wrong prefix still finds the name
    ],
)
def test_a_misspelt_name_is_matched_in_its_own_family_first(typo: str, meant: str) -> None:
    [found] = unknown_variables({typo: "1"}, None)
    assert found.suggestion == meant


def test_an_api_key_beside_a_login_in_the_environment_is_refused_naming_both() -> None:
    with pytest.raises(SettingsError, match=r"AMAZONQ_API_KEY.*AMAZONQ_REFRESH_TOKEN"):
        load_settings({"AMAZONQ_API_KEY": "ksk_x", "AMAZONQ_REFRESH_TOKEN": "r"}, env_file=None)
    settings = load_settings({"AMAZONQ_API_KEY": "ksk_x", "AMAZONQ_PROXY": "socks5://u:p@h:1080"}, env_file=None)
    assert settings.auth_method == "api_key" and settings.has_env_account
    assert "ksk_x" not in repr(settings) and ":p@" not in repr(settings)
    with pytest.raises(SettingsError, match="AMAZONQ_PROXY"):
        load_settings({"AMAZONQ_PROXY": "ftp://h:21"}, env_file=None)
