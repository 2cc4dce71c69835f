"""Command-line tools from the npm registry, installed once per version into a cache outside the repo.

    binary = npm_binary("@openai/codex", "0.171.0", "codex")   # skips the test, saying why, if it cannot

The cache is `$Q2API_TEST_TOOLS_DIR` (default `~/.cache/q2api-tests`), one folder per package
and version, filled by `npm install` under a file lock (parallel test workers install once) and
reused afterwards: a pinned version never changes. A machine without npm, or without the
registry, skips the tests that need the tool with the reason; it never fails them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL_TIMEOUT = 600.0  # seconds: the Codex package brings a ~150 MB native binary


def tools_dir() -> Path:
    configured = os.environ.get("Q2API_TEST_TOOLS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "q2api-tests"


def npm_binary(package: str, version: str, binary: str) -> Path:
    """The path of `binary` from `package@version`, installed if it is not yet; skips the test if it cannot be."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed: {package}@{version} cannot be installed for this test")
    prefix = tools_dir() / f"{package.replace('/', '+')}@{version}"
    target = prefix / "node_modules" / ".bin" / binary
    if target.exists():
        return target
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # another worker installed it while this one waited
            return target
        command = [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--no-save",
            f"{package}@{version}",
        ]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {package}@{version} did not finish within {INSTALL_TIMEOUT:.0f} s")
        if result.returncode != 0 or not target.exists():
            reason = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"npm install {package}@{version} failed (exit {result.returncode}): {reason[0][:200]}")
    return target
