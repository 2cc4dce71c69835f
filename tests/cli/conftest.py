"""Fixtures of the command-line tests."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from q2api.cli.accounts import SECRET_INPUT_VARIABLES
from q2api.settings import ENV_VARIABLES


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated store for in-process `main([...])` calls: no inherited setting, no `.env`, no terminal."""
    for variable in (*ENV_VARIABLES, *SECRET_INPUT_VARIABLES):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # a `.env` is read from the working directory; there is none here
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    data = tmp_path / "store"
    monkeypatch.setenv("Q2API_DATA_DIR", str(data))
    return data
