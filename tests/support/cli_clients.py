"""Real command-line clients (Claude Code, and others from npm such as Codex) for end-to-end tests.

    binary = claude_code()                      # installs the pinned version once, or skips the test
    result = run_claude_code(binary, base_url, prompt="…", home=tmp_path, allowed_tools=["WebSearch"])

A client is installed once per version with `npm install` into a cache directory outside the
repository (`$Q2API_TEST_CLIENTS_DIR`, default `~/.cache/q2api-test-clients/<name>-<version>`),
under a lock so parallel test processes install it once. A machine without npm, or where the
install fails (no registry), skips the tests that need the client with the reason.

Runs are hermetic: the client's home and configuration live in a temporary directory, its
traffic goes to the gateway on loopback, and everything optional that would reach the internet
(auto-update, telemetry, error reports, non-essential calls) is switched off by environment.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

INSTALL_TIMEOUT = 600  # seconds: a cold install downloads tens of MB from the registry


@dataclasses.dataclass(frozen=True)
class NpmClient:
    package: str  # the npm package
    version: str  # pinned: a new release must not change what the tests exercise
    binary: str  # the executable it installs under node_modules/.bin

    @property
    def directory(self) -> Path:
        root = Path(os.environ.get("Q2API_TEST_CLIENTS_DIR") or Path.home() / ".cache" / "q2api-test-clients")
        return root / f"{self.package.rsplit('/', 1)[-1]}-{self.version}"

    @property
    def path(self) -> Path:
        return self.directory / "node_modules" / ".bin" / self.binary


CLAUDE_CODE = NpmClient("@anthropic-ai/claude-code", "2.1.332", "claude")


def installed(client: NpmClient) -> Path:
    """The client's executable, installed first if needed; skips the calling test when it cannot be had."""
    if client.path.exists():
        return client.path
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"{client.package} needs node and npm, which this machine lacks")
    client.directory.mkdir(parents=True, exist_ok=True)
    with open(client.directory / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be installing it right now
        if not client.path.exists():
            try:
                done = subprocess.run(
                    [
                        npm,
                        "install",
                        "--no-audit",
                        "--no-fund",
                        "--prefix",
                        str(client.directory),
                        f"{client.package}@{client.version}",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                pytest.skip(f"installing {client.package}@{client.version} with npm took over {INSTALL_TIMEOUT}s")
            if done.returncode != 0 or not client.path.exists():
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                pytest.skip(f"npm could not install {client.package}@{client.version}: {' / '.join(tail)}")
    return client.path


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
