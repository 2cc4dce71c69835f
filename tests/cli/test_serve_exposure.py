"""`q2api serve` says at start-up when a gateway without client keys listens beyond loopback (issue 26, item 3).

Run in-process with uvicorn's `run` replaced (nothing listens, least of all on 0.0.0.0), and
the log captured.
"""

from __future__ import annotations

from typing import Any

import pytest

from q2api.cli.main import main
from q2api.settings import ENV_VARIABLES
from tests.support.gateway_harness import capture_logs

OPEN_TO_ANYONE = "anyone who can reach this address can use the gateway"


@pytest.fixture
def serve_in_process(tmp_path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """`main(["serve", …])` runs up to uvicorn, which is not started; returns what it was asked to run."""
    for variable in ENV_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("Q2API_DATA_DIR", str(tmp_path / "data"))
    started: list[dict[str, Any]] = []
    monkeypatch.setattr("uvicorn.run", lambda *args, **options: started.append(options))
    monkeypatch.setattr("q2api.server.logging_setup.configure_logging", lambda *args: None)  # keep the capture sink
    return started


def warnings_of(*argv: str) -> list[str]:
    with capture_logs() as logs:
        assert main(["serve", *argv]) == 0
    return [line.message for line in logs.lines if line.level == "WARNING"]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_listening_beyond_loopback_without_client_keys_is_a_warning(serve_in_process, host: str) -> None:
    (warning,) = [line for line in warnings_of("--host", host) if OPEN_TO_ANYONE in line]
    assert warning.startswith(f"listening on {host} without client keys (Q2API_API_KEYS is empty)")
    assert "set Q2API_API_KEYS" in warning and "Q2API_ALLOWED_HOSTS" in warning
    assert serve_in_process[0]["host"] == host


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_listening_on_loopback_is_no_warning(serve_in_process, host: str) -> None:
    assert not [line for line in warnings_of("--host", host) if OPEN_TO_ANYONE in line]


def test_client_keys_make_it_no_warning(serve_in_process, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("Q2API_API_KEYS", "a-client-key")
    assert not [line for line in warnings_of("--host", "0.0.0.0") if OPEN_TO_ANYONE in line]


def test_a_star_says_that_every_host_is_answered(serve_in_process, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("Q2API_ALLOWED_HOSTS", "*")
    (warning,) = [line for line in warnings_of("--host", "0.0.0.0") if OPEN_TO_ANYONE in line]
    assert "every request is answered, whatever its Host" in warning
