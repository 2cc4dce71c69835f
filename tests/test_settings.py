from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from q2api.conversion.loop_guard import LoopMode, LoopPolicy
from q2api.server.wiring import loop_policy
from q2api.settings import ENV_VARIABLES, Settings, SettingsError, load_settings


def write_env_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".env"
    path.write_text(text)
    return path


def test_defaults_without_any_configuration(tmp_path: Path) -> None:
    settings = load_settings({}, env_file=tmp_path / "missing.env")
    assert settings == Settings()
    assert settings.endpoint == ""  # each account's hosts are derived from its login kind and region
    assert settings.oidc_endpoint == "https://oidc.us-east-1.amazonaws.com"
    assert settings.kiro_refresh_endpoint == "https://prod.us-east-1.auth.desktop.kiro.dev/refreshToken"
    assert settings.data_dir == Path("data")
    assert settings.max_body_bytes == 32 * 1024 * 1024
    assert (settings.ping_interval, settings.connect_timeout, settings.first_byte_timeout, settings.read_timeout) == (
        10.0,
        10.0,
        120.0,
        300.0,
    )
    assert (settings.max_retries, settings.loop_threshold, settings.loop_mode) == (3, 3, "warn")
    assert settings.loop_storm_threshold == 8
    assert settings.log_level == "INFO" and settings.log_format == "text"
    assert settings.debug_message_conversion is False
    assert settings.api_keys == () and not settings.has_env_account


def test_environment_beats_env_file_which_beats_defaults(tmp_path: Path) -> None:
    env_file = write_env_file(
        tmp_path,
        "Q2API_LOG_LEVEL=debug\nQ2API_MAX_RETRIES=5\nAMAZONQ_ENDPOINT=http://from-file.example/\n",
    )
    settings = load_settings({"Q2API_MAX_RETRIES": "1"}, env_file=env_file)
    assert settings.max_retries == 1  # environment
    assert settings.log_level == "DEBUG"  # .env file
    assert settings.endpoint == "http://from-file.example/"  # .env file
    assert settings.read_timeout == 300.0  # default


def test_env_file_none_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_env_file(tmp_path, "Q2API_MAX_RETRIES=7\n")
    assert load_settings({}, env_file=None).max_retries == 3
    assert load_settings({}).max_retries == 7  # default: .env in the working directory


def test_the_loop_guard_settings_become_one_policy() -> None:
    settings = load_settings(
        {"Q2API_LOOP_MODE": " Block ", "Q2API_LOOP_THRESHOLD": "4", "Q2API_LOOP_STORM_THRESHOLD": "5"}, env_file=None
    )
    assert settings.loop_mode is LoopMode.BLOCK  # the guard's own enum, not a second copy of its values
    assert loop_policy(settings) == LoopPolicy(LoopMode.BLOCK, repetitions=4, storm_calls=5)


def test_lists_and_model_map_are_parsed() -> None:
    settings = load_settings(
        {
            "Q2API_API_KEYS": " key-a, key-b ,,",
            "Q2API_MODEL_MAP": "claude-x=q-x, claude-y = q-y",
            "DEBUG_MESSAGE_CONVERSION": "TRUE",
        },
        env_file=None,
    )
    assert settings.api_keys == ("key-a", "key-b")
    assert dict(settings.model_map) == {"claude-x": "q-x", "claude-y": "q-y"}
    assert settings.debug_message_conversion is True


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("Q2API_MAX_RETRIES", "three"),
        ("Q2API_MAX_RETRIES", "-1"),
        ("Q2API_READ_TIMEOUT", "0"),
        ("Q2API_PING_INTERVAL", "soon"),
        ("Q2API_LOG_LEVEL", "LOUD"),
        ("Q2API_LOG_FORMAT", "xml"),
        ("Q2API_LOOP_MODE", "panic"),
        ("Q2API_LOOP_STORM_THRESHOLD", "2"),
        ("DEBUG_MESSAGE_CONVERSION", "maybe"),
        ("AMAZONQ_ENDPOINT", "q.us-east-1.amazonaws.com"),
        ("AMAZONQ_AUTH_METHOD", "password"),
        ("Q2API_MODEL_MAP", "claude-only"),
        ("Q2API_MAX_BODY_BYTES", "12"),
        ("Q2API_ALLOWED_HOSTS", "gateway.lan:8000"),
        ("Q2API_ALLOWED_HOSTS", "http://gateway.lan"),
        ("Q2API_ALLOWED_HOSTS", "*gateway"),
        ("Q2API_REDIS_PREFIX", "team {a}"),
        ("Q2API_REDIS_PREFIX", "{q2api}"),
    ],
)
def test_bad_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({variable: value}, env_file=None)
    assert variable in str(caught.value)


def test_allowed_hosts_are_names_in_lower_case() -> None:
    settings = load_settings(
        {"Q2API_ALLOWED_HOSTS": "Gateway.LAN., 10.0.0.5, [fd00::1], my_service, *.Corp.Example, *"}, env_file=None
    )
    assert settings.allowed_hosts == ("gateway.lan", "10.0.0.5", "fd00::1", "my_service", "*.corp.example", "*")
    assert load_settings({}, env_file=None).allowed_hosts == ()
    with pytest.raises(SettingsError, match="list names without a port"):
        load_settings({"Q2API_ALLOWED_HOSTS": "gateway.lan:8000"}, env_file=None)


def test_client_id_without_secret_is_rejected() -> None:
    with pytest.raises(SettingsError, match="AMAZONQ_CLIENT_SECRET"):
        load_settings({"AMAZONQ_CLIENT_ID": "abc"}, env_file=None)


def test_auth_method_auto_resolution() -> None:
    social = load_settings({"AMAZONQ_REFRESH_TOKEN": "r"}, env_file=None)
    idc = load_settings(
        {"AMAZONQ_REFRESH_TOKEN": "r", "AMAZONQ_CLIENT_ID": "c", "AMAZONQ_CLIENT_SECRET": "s"}, env_file=None
    )
    forced = load_settings(
        {
            "AMAZONQ_REFRESH_TOKEN": "r",
            "AMAZONQ_CLIENT_ID": "c",
            "AMAZONQ_CLIENT_SECRET": "s",
            "AMAZONQ_AUTH_METHOD": "social",
        },
        env_file=None,
    )
    assert (social.auth_method, idc.auth_method, forced.auth_method) == ("social", "idc", "social")
    assert social.has_env_account


def test_idc_without_client_registration_is_rejected() -> None:
    with pytest.raises(SettingsError, match="AMAZONQ_AUTH_METHOD"):
        load_settings({"AMAZONQ_REFRESH_TOKEN": "r", "AMAZONQ_AUTH_METHOD": "idc"}, env_file=None)


def test_repr_masks_every_secret() -> None:
    secrets = {
        "Q2API_API_KEYS": "client-key-SECRET1",
        "AMAZONQ_REFRESH_TOKEN": "refresh-SECRET2",
        "AMAZONQ_CLIENT_ID": "client-id-visible",
        "AMAZONQ_CLIENT_SECRET": "client-SECRET3",
        "AMAZONQ_ACCESS_TOKEN": "access-SECRET4",
    }
    settings = load_settings(secrets, env_file=None)
    for rendering in (repr(settings), str(settings), f"{settings}"):
        assert "SECRET" not in rendering
    assert "refresh_token=<secret" in repr(settings)
    assert settings.refresh_token == "refresh-SECRET2"  # the value itself is intact


def test_env_example_lists_every_variable() -> None:
    example = (Path(__file__).resolve().parent.parent / ".env.example").read_text()
    for variable in ENV_VARIABLES:
        assert f"{variable}=" in example, variable
    # and the example itself loads
    assert load_settings({}, env_file=Path(__file__).resolve().parent.parent / ".env.example") is not None


def test_a_shared_store_needs_a_key_and_its_password_is_never_shown() -> None:
    url = "postgresql://q2api:pw-NEVER-SHOWN@db:5432/q2api"
    with pytest.raises(SettingsError) as refused:
        load_settings({"Q2API_DATABASE_URL": url}, env_file=None)
    assert "Q2API_SECRET_KEY" in str(refused.value) and "pw-NEVER-SHOWN" not in str(refused.value)
    key = Fernet.generate_key().decode()
    settings = load_settings({"Q2API_DATABASE_URL": url, "Q2API_SECRET_KEY": key}, env_file=None)
    assert settings.database_url == url
    assert "pw-NEVER-SHOWN" not in repr(settings) and key not in repr(settings)
    assert "postgresql://q2api:***@db:5432/q2api" in repr(settings)
    assert load_settings({"Q2API_DATABASE_URL": ""}, env_file=None).database_url is None  # empty = SQLite


@pytest.mark.parametrize(
    ("url", "complaint"),
    [("redis://h/0", "postgresql://, mysql:// or mariadb://"), ("postgresql://u:pw-NEVER-SHOWN@h", "database")],
)
def test_a_database_url_that_is_not_one_is_refused(url: str, complaint: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"Q2API_DATABASE_URL": url}, env_file=None)
    assert "Q2API_DATABASE_URL" in str(refused.value) and complaint in str(refused.value)
    assert "pw-NEVER-SHOWN" not in str(refused.value)
