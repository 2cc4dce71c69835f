"""The real Claude Code CLI for end-to-end tests (Codex: codex_cli.py).

    binary = claude_code()  # installs the pinned version once, or skips the test
    result = run_claude_code(binary, base_url, prompt="…", home=tmp_path, allowed_tools=["WebSearch"])

Claude Code is installed once per version from npm into a cache outside the repository, like every
npm tool of the tests (npm_tools.py: a machine without npm or the registry skips the test).

Runs are hermetic: the client's home and configuration live in a temporary directory, its
traffic goes to the gateway on loopback, and everything optional that would reach the internet
(auto-update, telemetry, error reports, non-essential calls) is switched off by environment.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.npm_tools import NpmTool, installed

CLAUDE_CODE = NpmTool("@anthropic-ai/claude-code", "2.1.332", "claude")


def claude_code() -> Path:
    return installed(CLAUDE_CODE)


# Everything Claude Code would send anywhere but the gateway, switched off (its documented variables).
CLAUDE_CODE_OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
}


def run_claude_code(
    binary: Path,
    base_url: str,
    *,
    prompt: str,
    home: Path,
    api_key: str,
    model: str | None = None,
    allowed_tools: Sequence[str] = (),
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """`claude -p PROMPT --output-format json` against the gateway at `base_url`, hermetically."""
    home.mkdir(parents=True, exist_ok=True)
    workdir = home / "project"
    workdir.mkdir(exist_ok=True)
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        "NO_PROXY": "127.0.0.1,localhost",
        **CLAUDE_CODE_OFFLINE,
        **(env or {}),
    }
    command = [str(binary), "-p", prompt, "--output-format", "json"]
    if model:
        command += ["--model", model]
    if allowed_tools:
        command += ["--allowedTools", ",".join(allowed_tools)]
    command += list(extra_args)
    return subprocess.run(
        command,
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
