"""Running the command line in-process and reading what it printed."""

from __future__ import annotations

import pytest

from q2api.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`q2api *argv` in this process: its exit status, stdout and stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
