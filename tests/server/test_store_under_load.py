"""The default SQLite store with everything that shares it at once (issue 30, item 1): a gateway under
30 concurrent clients over /v1/messages and /v1/responses (stored) with a store key, while the CLI
writes from other processes (keys create and revoke, usage, accounts import).

Each part passed its own tests while together they broke the store: the gateway opened its file twice,
and each opening opened and closed a descriptor on the live database, which drops every POSIX lock the
process holds on it (SQLite's "How To Corrupt An SQLite Database File", §2.2). Nothing may be lost:
no store failure in the log, every stored response retrievable and continuable, the ledger exact, and
an account imported by the CLI serving within the reload interval. In one process (the in-process
gateway) and in two (`q2api serve --workers 2`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import httpx2
import pytest

from q2api.accounts.reload import DEFAULT_RELOAD_INTERVAL
from q2api.store.shared_database import SharedDatabase
from q2api.store.sqlite_database import DB_FILENAME, SqliteDatabase
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support import credential_files
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY
from tests.support.gateway_harness import CLIENT_KEY, capture_logs, open_gateway
from tests.support.serve_process import serve
from tests.support.store_load import (
    IMPORTED_LABEL,
    CliBeside,
    door_load,
    not_continuable,
    q2api,
    unretrievable,
    usage_by_key,
)
from tests.support.tenant_stores import database_url_for

pytestmark = pytest.mark.asyncio

REQUESTS = 300
CONCURRENCY = 30


def quick_reply(_record: object) -> scripts.StreamReply:
    return scripts.stream(scripts.conversation_event(), scripts.text_events("ok"), scripts.usage_event(10, 2))


async def store_key(data_dir: Path) -> str:
    """`q2api keys create --label loadkey --rpm 100000 --max-concurrent 50 --credits-per-day 100000`."""
    code, out, err = await q2api(
        data_dir, "keys", "create", "--label", "loadkey",
        "--rpm", "100000", "--max-concurrent", "50", "--credits-per-day", "100000",
    )  # fmt: skip
    assert code == 0, err
    return out.strip()


async def until_listed(base_url: str, label: str, timeout: float) -> float:
    """Seconds until /healthz lists the account `label` (fails after `timeout`)."""
    started = time.monotonic()
    async with httpx2.AsyncClient(base_url=base_url, timeout=10) as http:
        while time.monotonic() - started < timeout:
            accounts = (await http.get("/healthz")).json()["accounts"]
            if any(account["label"] == label for account in accounts):
                return time.monotonic() - started
            await asyncio.sleep(0.1)
    raise AssertionError(f"the account {label!r} the CLI imported never joined the pool")


def integrity(data_dir: Path) -> str:
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


async def test_one_gateway_and_the_cli_beside_it_lose_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = await store_key(data_dir)
    kiro_cache = credential_files.kiro_ide_social(tmp_path / "kiro-cache")
    with capture_logs() as logs:
        async with open_gateway(data_dir, prepare=lambda sim: setattr(sim, "responder", quick_reply)) as gw:
            cli = CliBeside(data_dir, kiro_cache)
            async with cli.running():
                load = asyncio.create_task(door_load(gw.base_url, key, requests=REQUESTS, concurrency=CONCURRENCY))
                await cli.imported.wait()
                imported_after = await until_listed(gw.base_url, IMPORTED_LABEL, timeout=10 * DEFAULT_RELOAD_INTERVAL)
                outcome = await load
            missing = await unretrievable(gw.base_url, key, outcome.stored)
            refused = await not_continuable(gw.base_url, key, outcome.stored)
            # The imported account serves too: environment-key requests until one went through it.
            async with httpx2.AsyncClient(base_url=gw.base_url, timeout=30) as http:
                for _ in range(6):
                    body = {
                        "model": "claude-sonnet-5-5",
                        "max_tokens": 8,
                        "messages": [{"role": "user", "content": "x"}],
                    }
                    response = await http.post("/v1/messages", json=body, headers={"x-api-key": CLIENT_KEY})
                    assert response.status_code == 200, response.text
    assert outcome.statuses == {200: REQUESTS}, outcome.statuses
    assert cli.failures == []
    assert imported_after <= 3 * DEFAULT_RELOAD_INTERVAL + 1, imported_after
    assert missing == [] and refused == [], (len(missing), len(refused))
    troubles = [f"{line.level} {line.message}" for line in logs.lines if line.level in ("WARNING", "ERROR", "CRITICAL")]
    assert troubles == []
    ledger = await usage_by_key(data_dir)
    assert ledger["loadkey"]["requests"] == REQUESTS + len(outcome.stored)  # the load, then the continuations
    assert ledger["loadkey"]["errors"] == 0
    by_account = {row["account"]: row for row in await _usage_by_account(data_dir)}
    assert by_account.get(IMPORTED_LABEL, {}).get("requests", 0) > 0, by_account
    assert integrity(data_dir) == "ok"


async def _usage_by_account(data_dir: Path) -> list[dict]:
    import json

    code, out, err = await q2api(data_dir, "usage", "--by", "account", "--format", "json")
    assert code == 0, err
    return json.loads(out)


async def test_two_workers_on_one_file_and_the_cli_beside_them_lose_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = await store_key(data_dir)
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream.sim.responder = quick_reply
        with serve(tmp_path, upstream.env(), workers=2) as server:
            cli = CliBeside(data_dir)
            async with cli.running():
                outcome = await door_load(server.base_url, key, requests=REQUESTS, concurrency=CONCURRENCY)
            missing = await unretrievable(server.base_url, key, outcome.stored)
            refused = await not_continuable(server.base_url, key, outcome.stored)
        lines = list(server.lines)
    assert outcome.statuses == {200: REQUESTS}, outcome.statuses
    assert cli.failures == []
    assert missing == [] and refused == [], (len(missing), len(refused))
    assert [line for line in lines if "| WARNING" in line or "| ERROR" in line] == []
    ledger = await usage_by_key(data_dir)
    assert ledger["loadkey"]["requests"] == REQUESTS + len(outcome.stored)
    assert integrity(data_dir) == "ok"


@pytest.mark.parametrize("kind", ["sqlite", *SHARED_KINDS])
async def test_the_gateway_opens_its_database_once_for_everything_it_keeps_there(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accounts, stored responses, client keys, counters and the ledger on one engine (one pool)."""
    opened: list[str] = []
    for database_class in (SqliteDatabase, SharedDatabase):
        real_init = database_class.__init__

        def recording_init(self: object, where: object, *args: object, _init=real_init, **kwargs: object) -> None:
            opened.append(str(where))
            _init(self, where, *args, **kwargs)

        monkeypatch.setattr(database_class, "__init__", recording_init)
    with database_url_for(kind, tmp_path) as database_url:
        extra = {"Q2API_DATABASE_URL": database_url, "Q2API_SECRET_KEY": TEST_SECRET_KEY} if database_url else {}
        replying = lambda sim: setattr(sim, "responder", quick_reply)  # noqa: E731
        async with open_gateway(tmp_path / "data", prepare=replying, **extra) as gw:
            # Both doors, stored responses and the ledger (the environment key: no key to look up).
            outcome = await door_load(gw.base_url, CLIENT_KEY, requests=10, concurrency=5)
            assert outcome.statuses == {200: 10}
            await asyncio.sleep(1.5)  # a round of the ledger's writer
    assert len(opened) == 1, opened
