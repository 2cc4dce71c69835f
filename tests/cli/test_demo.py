"""`q2api demo` as a user runs it: a fresh process, no Amazon Q settings, loopback only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from q2api.cli.demo import GREETING, OPENAI_GREETING, RESPONSES_FOLLOW_UP, RESPONSES_GREETING
from q2api.settings import ENV_VARIABLES

# Nothing listens on the discard port: traffic sent through this "proxy" fails at once.
DEAD_PROXY = "http://127.0.0.1:9"


def demo_environment() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ENV_VARIABLES
        and not key.startswith(("Q2API_", "AMAZONQ_", "ANTHROPIC_"))
        and key.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    # A proxy that does not work: the demo must keep its loopback traffic away from any proxy.
    env.update({"HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "http_proxy": DEAD_PROXY})
    return env


def run_demo_process(cwd: Path, *code: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "\n".join(code)] if code else [sys.executable, "-m", "q2api", "demo"]
    return subprocess.run(command, env=demo_environment(), cwd=cwd, capture_output=True, text=True, timeout=60)


def test_demo_streams_a_simulated_reply_end_to_end_without_any_account(tmp_path):
    # A `.env` the demo must not read: its bad value would stop any command that loads settings.
    (tmp_path / ".env").write_text("Q2API_LOG_LEVEL=LOUD\nAMAZONQ_REFRESH_TOKEN=user-real-token\n")

    done = run_demo_process(tmp_path)

    assert done.returncode == 0, done.stderr
    first_line = done.stdout.splitlines()[0]
    assert "SIMULATED" in first_line
    assert GREETING in done.stdout  # every streamed chunk arrived, in order
    # The model list came from the simulator's ListAvailableModels, through the gateway.
    assert "ListAvailableModels catalogue): claude-opus-5-5, claude-sonnet-5-5" in done.stdout
    assert "stop_reason: end_turn" in done.stdout
    assert '[tool_use] get_weather({"city": "Paris", "unit": "celsius"})' in done.stdout
    assert "stop_reason: tool_use" in done.stdout
    assert "input_tokens=" in done.stdout and "output_tokens=" in done.stdout
    assert OPENAI_GREETING in done.stdout  # the OpenAI SDK's stream, through the OpenAI door
    assert "finish_reason: stop" in done.stdout and "completion_tokens=" in done.stdout
    # The Responses door: a streamed response, then a turn that continued it from the store.
    assert RESPONSES_GREETING in done.stdout and RESPONSES_FOLLOW_UP in done.stdout
    assert "Continued with previous_response_id=resp_" in done.stdout and "status: completed" in done.stdout
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()  # its store lived in a temporary directory, not ./data


def test_demo_reports_a_failed_request_plainly_and_exits_non_zero(tmp_path):
    # The simulated upstream refuses the first request as too long: the gateway answers 400.
    done = run_demo_process(
        tmp_path,
        "import sys",
        "from q2api.cli import demo",
        "from q2api.testing import scripts",
        "scripts.text_reply = lambda *args, **kwargs: scripts.context_overflow()",
        "sys.exit(demo.run_demo())",
    )

    assert done.returncode == 1
    assert "SIMULATED" in done.stdout
    assert "q2api demo failed: the gateway answered with an error" in done.stderr
    assert "prompt is too long" in done.stderr
    assert "Traceback" not in done.stderr


def test_demo_without_the_demo_extra_names_the_extra_in_one_line(monkeypatch, capsys):
    # A None entry in sys.modules makes `import anthropic` raise ImportError, as on an install without it.
    monkeypatch.setitem(sys.modules, "anthropic", None)
    from q2api.cli.main import main

    code = main(["demo"])

    assert code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n")
    assert "`demo` extra" in err and 'pip install "q2api[demo]"' in err


def test_the_gateway_needs_neither_sdk_of_the_demo_extra(tmp_path):
    # Every q2api module imports with the demo extra's SDKs unimportable: `pip install q2api` serves.
    done = run_demo_process(
        tmp_path,
        "import importlib, pkgutil, sys",
        "sys.modules['anthropic'] = sys.modules['openai'] = None",
        "import q2api",
        "names = [m.name for m in pkgutil.walk_packages(q2api.__path__, 'q2api.') if m.name != 'q2api.__main__']",
        "for name in names: importlib.import_module(name)",
        "print(len(names), 'modules imported')",
    )

    assert done.returncode == 0, done.stderr
    assert "modules imported" in done.stdout
