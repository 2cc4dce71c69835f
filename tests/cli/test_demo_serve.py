"""`q2api demo --serve` as a user runs it: a fresh process, real SDK clients pasted onto its lines, Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from pathlib import Path

import anthropic
import openai
import pytest

from tests.support.codex_cli import codex_config
from tests.support.serve_process import clean_environment

EXPORT = re.compile(r"^\s*export (?P<name>[A-Z][A-Z0-9_]*)=(?P<value>\S+)$")


class DemoServer:
    """`python -m q2api demo --serve --port 0`, its stdout read line by line until the paste lines are out."""

    def __init__(self, cwd: Path) -> None:
        env = clean_environment()
        env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"})  # must be bypassed
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "q2api", "demo", "--serve", "--port", "0"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, into=lines: into.extend(iter(s.readline, "")), daemon=True).start()
        deadline = time.monotonic() + 60
        while not any("Ctrl-C" in line for line in self.out):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"no paste lines; stdout: {''.join(self.out)} stderr: {''.join(self.err)}")
            time.sleep(0.05)

    def exports(self) -> dict[str, str]:
        return {m["name"]: m["value"] for line in self.out if (m := EXPORT.match(line.rstrip("\n")))}

    def stop(self, signum: int = signal.SIGINT) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=30)


@pytest.fixture
def demo_server(tmp_path):
    server = DemoServer(tmp_path)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)


def test_demo_serve_prints_lines_that_real_sdk_clients_work_with_and_stops_cleanly_on_ctrl_c(demo_server):
    exports = demo_server.exports()
    assert "SIMULATED" in demo_server.out[0]
    base_url = exports["ANTHROPIC_BASE_URL"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
    assert exports["OPENAI_BASE_URL"] == base_url + "/v1"
    assert exports["ANTHROPIC_API_KEY"] == exports["OPENAI_API_KEY"]
    # Codex's own recipe (it reads no OPENAI_BASE_URL): the config.toml the real Codex is tested with.
    printed = "".join(demo_server.out)
    recipe = printed.split("--- config.toml ---\n", 1)[1].split("\n---\n", 1)[0]
    assert tomllib.loads(recipe) == tomllib.loads(codex_config(base_url, web_search=True))
    assert exports[tomllib.loads(recipe)["model_providers"]["q2api"]["env_key"]] == exports["OPENAI_API_KEY"]

    claude = anthropic.Anthropic(base_url=base_url, api_key=exports["ANTHROPIC_API_KEY"], max_retries=0)
    message = claude.messages.create(
        model="claude-sonnet-5-5", max_tokens=256, messages=[{"role": "user", "content": "ping from anthropic"}]
    )
    assert "ping from anthropic" in message.content[0].text
    chat = openai.OpenAI(base_url=exports["OPENAI_BASE_URL"], api_key=exports["OPENAI_API_KEY"], max_retries=0)
    completion = chat.chat.completions.create(
        model="claude-sonnet-5-5", messages=[{"role": "user", "content": "ping from openai"}]
    )
    assert "ping from openai" in completion.choices[0].message.content
    # The printed console address answers with the page (the admin key printed beside it signs in).
    console = next(line for line in demo_server.out if line.startswith("Console: "))
    assert "admin key: " in console
    with urllib.request.urlopen(console.split()[1], timeout=10) as page:
        assert page.status == 200

    assert demo_server.stop() == 0
    stderr = "".join(demo_server.err)
    assert "Traceback" not in stderr
    assert "POST /v1/messages" in stderr  # the request log is on, so the user sees each request


def test_demo_serve_stops_cleanly_on_sigterm_too(demo_server):
    assert demo_server.stop(signal.SIGTERM) == 0
    assert "q2api demo: stopped." in "".join(demo_server.err)


def test_demo_port_without_serve_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "q2api", "demo", "--port", "8123"],
        cwd=tmp_path,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--port only goes with --serve" in done.stderr
