"""Everything that shares the default store at once: clients on both doors, the CLI in other processes.

    outcome = await door_load(base_url, key, requests=300, concurrency=30)
    cli = CliBeside(data_dir, kiro_cache)        # keys create/revoke, usage, accounts import, in turn
    async with cli.running(): ...                # until the block ends
    lost = await unretrievable(base_url, key, outcome.stored)
    ledger = await usage_by_key(data_dir)

What issue 30 found broken together though each part passed alone (the store's file opened twice in
one process, its POSIX locks dropped); tests/server/test_store_under_load.py runs it, and
bench/store_load_runs.py reports the same figures for `q2api serve`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2

from tests.support.serve_process import clean_environment

MODEL = "claude-sonnet-5-5"
IMPORTED_LABEL = "imported-beside"


@dataclasses.dataclass
class LoadOutcome:
    statuses: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    stored: list[str] = dataclasses.field(default_factory=list)  # ids of the stored responses answered

    @property
    def posts(self) -> int:
        return sum(self.statuses.values())


def _headers(key: str) -> dict[str, str]:
    return {"content-type": "application/json", "authorization": f"Bearer {key}", "x-api-key": key}


async def door_load(base_url: str, key: str, *, requests: int, concurrency: int) -> LoadOutcome:
    """`requests` POSTs by `concurrency` clients, half `/v1/messages`, half `/v1/responses` (stored)."""
    outcome = LoadOutcome()
    queue = iter(range(requests))
    limits = httpx2.Limits(max_connections=concurrency)
    async with httpx2.AsyncClient(base_url=base_url, timeout=60, limits=limits) as http:

        async def client() -> None:
            for n in queue:
                if n % 2 == 0:
                    body: dict[str, Any] = {
                        "model": MODEL,
                        "max_tokens": 16,
                        "messages": [{"role": "user", "content": "hi"}],
                    }
                    response = await http.post("/v1/messages", json=body, headers=_headers(key))
                else:
                    body = {"model": MODEL, "input": f"hi {n}", "store": True}
                    response = await http.post("/v1/responses", json=body, headers=_headers(key))
                    if response.status_code == 200:
                        outcome.stored.append(response.json()["id"])
                outcome.statuses[response.status_code] += 1

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return outcome


async def unretrievable(base_url: str, key: str, ids: list[str]) -> list[str]:
    """The ids of `ids` that GET /v1/responses/{id} does not give back."""
    missing = []
    async with httpx2.AsyncClient(base_url=base_url, timeout=60) as http:
        for response_id in ids:
            if (await http.get(f"/v1/responses/{response_id}", headers=_headers(key))).status_code != 200:
                missing.append(response_id)
    return missing


async def not_continuable(base_url: str, key: str, ids: list[str], *, concurrency: int = 10) -> list[str]:
    """The ids of `ids` that a `previous_response_id` continuation does not take up (one POST each)."""
    refused: list[str] = []
    queue = iter(ids)
    async with httpx2.AsyncClient(base_url=base_url, timeout=60) as http:

        async def client() -> None:
            for response_id in queue:
                body = {"input": "and then?", "previous_response_id": response_id, "store": False}
                if (await http.post("/v1/responses", json=body, headers=_headers(key))).status_code != 200:
                    refused.append(response_id)

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return refused


async def q2api(data_dir: Path, *args: str, **env: str) -> tuple[int, str, str]:
    """`q2api *args` in a process of its own on `data_dir`: its exit status, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "q2api", *args,
        env={**clean_environment(), "Q2API_DATA_DIR": str(data_dir), **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def usage_by_key(data_dir: Path, **env: str) -> dict[str, dict[str, Any]]:
    """`q2api usage --by key --format json`, by key label."""
    code, out, err = await q2api(data_dir, "usage", "--by", "key", "--format", "json", **env)
    assert code == 0, err
    return {row["key"]: row for row in json.loads(out)}


class CliBeside:
    """An operator at the CLI while the gateway serves: `keys create`, `keys revoke`, `usage`, and once
    `accounts import` (of `kiro_cache`, labelled IMPORTED_LABEL), each a process of its own, in turn."""

    def __init__(self, data_dir: Path, kiro_cache: Path | None = None, **env: str) -> None:
        self._data_dir = data_dir
        self._kiro_cache = kiro_cache
        self._env = env
        self.failures: list[str] = []  # commands that failed, with their stderr
        self.runs = 0
        self.imported = asyncio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CliBeside]:
        stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._loop(stop))
        try:
            yield self
        finally:
            stop.set()
            await task

    async def _loop(self, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set() or n == 0:
            n += 1
            commands: list[tuple[str, ...]] = [("keys", "create", "--label", f"side-{n}")]
            if n == 1 and self._kiro_cache is not None:
                commands.append(("accounts", "import", "--kiro-ide", str(self._kiro_cache), "--label", IMPORTED_LABEL))
            commands += [("keys", "revoke", f"side-{n}"), ("usage", "--by", "key"), ("keys", "list")]
            for command in commands:
                code, _out, err = await q2api(self._data_dir, *command, **self._env)
                self.runs += 1
                if code != 0:
                    self.failures.append(f"q2api {' '.join(command)}: exit {code}: {err.strip()[-300:]}")
                if command[:2] == ("accounts", "import"):
                    self.imported.set()
