"""Command-line tools from the npm registry (Claude Code, Codex), pinned, installed once per version outside the repo.

    CODEX = NpmTool("@openai/codex", "0.171.0", "codex")
    binary = installed(CODEX)  # skips the calling test, saying why, if it cannot be had

The cache is `$Q2API_TEST_TOOLS_DIR` (the older name `$Q2API_TEST_CLIENTS_DIR` is read too; default
`~/.cache/q2api-tests`), one folder per package and version, filled by `npm install` under a file
lock (parallel test processes install once) and reused afterwards: a pinned version never
changes. A machine without node and npm, or without the registry, skips the tests that need the
tool with the reason; it never fails them.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL_TIMEOUT = 600.0  # seconds: the Codex package brings a ~150 MB native binary


def tools_dir() -> Path:
    configured = os.environ.get("Q2API_TEST_TOOLS_DIR") or os.environ.get("Q2API_TEST_CLIENTS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "q2api-tests"


@dataclasses.dataclass(frozen=True)
class NpmTool:
    package: str  # the npm package
    version: str  # pinned: a new release must not change what the tests exercise
    binary: str  # the executable it installs under node_modules/.bin

    @property
    def directory(self) -> Path:
        return tools_dir() / f"{self.package.replace('/', '+')}@{self.version}"

    @property
    def path(self) -> Path:
        return self.directory / "node_modules" / ".bin" / self.binary

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


def installed(tool: NpmTool) -> Path:
    """The tool's executable, installed first if it is not yet; skips the calling test when it cannot be."""
    if tool.path.exists():
        return tool.path
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"{tool.spec} needs node and npm, which this machine lacks")
    tool.directory.mkdir(parents=True, exist_ok=True)
    with (tool.directory / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be installing it right now
        if tool.path.exists():  # it did, while this one waited
            return tool.path
        command = [npm, "install", "--prefix", str(tool.directory), "--no-audit", "--no-fund", "--no-save", tool.spec]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {tool.spec} did not finish within {INSTALL_TIMEOUT:.0f} s")
        if done.returncode != 0 or not tool.path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:] or ["no output"]
            pytest.skip(f"npm install {tool.spec} failed (exit {done.returncode}): {' / '.join(tail)[:300]}")
    return tool.path
