"""Reading what a gateway under test captured, and running the capture commands of the CLI in-process."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from q2api.cli.main import main
from q2api.settings import ENV_VARIABLES


async def wait_for_capture(directory: Path, capture_id: str, timeout: float = 10.0) -> dict[str, Any]:
    """The capture file `capture_id` once it is written (captures are written off the event loop)."""
    path = directory / f"{capture_id}.json"
    deadline = asyncio.get_running_loop().time() + timeout
    while not path.exists():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no capture {capture_id} in {directory}: {sorted(os.listdir(directory))}")
        await asyncio.sleep(0.02)
    return orjson.loads(path.read_bytes())


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ holding `values` and no other q2api setting, for commands that read the environment."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name in ENV_VARIABLES or name.startswith(("Q2API_", "AMAZONQ_")):
            del os.environ[name]
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


async def run_cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    """`q2api ARGS` in this process, in a thread (the command runs an event loop of its own), from `cwd`
    (so no .env of the repository is read): status, stdout, stderr."""
    return await asyncio.to_thread(_run_cli, args, cwd)


def _run_cli(args: tuple[str, ...], cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        os.chdir(previous)
    return status, out.getvalue(), err.getvalue()
