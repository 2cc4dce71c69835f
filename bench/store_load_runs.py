"""Issue 30's three runs on the default SQLite store, as a new user would make them.

`q2api serve` (the default store in a fresh data directory, `--workers N`) on the simulated Amazon Q,
answering at once; one client key from `q2api keys create --label loadkey --rpm 100000
--max-concurrent 50 --credits-per-day 100000`; then REQUESTS requests at CONCURRENCY, half
`/v1/messages`, half `/v1/responses` (stored). Three runs:

    store-key+cli   the store key, with `q2api keys create/revoke` and `q2api usage` run beside the load
    store-key       the store key alone
    env-key         an environment key (`Q2API_API_KEYS`) only

For each: the answers by status, the WARNING lines of a failing store, stored responses that are not
retrievable (each one fetched back with GET /v1/responses/{id} after the load), and the ledger's
count per key (`q2api usage --by key`, after the gateway stopped), then `PRAGMA integrity_check`.

    .venv/bin/python bench/store_load_runs.py [--requests 600] [--concurrency 30] [--workers 1] [--only store-key]

Not a speed benchmark: a check of what the store loses under load, with figures to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.serve_process import clean_environment, serve

MODEL = "claude-sonnet-5-5"
ENV_KEY = "q2api-bench-env-key-3a9c1e"
RUNS = ("store-key+cli", "store-key", "env-key")
STORE_FAILURE = re.compile(r"WARNING.*(the SQLite store|store failed|could not be|not stored|not written)")


def q2api(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**clean_environment(), "Q2API_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "q2api", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def cli_beside(data_dir: Path, stop: threading.Event, done: list[str]) -> None:
    """`q2api keys create`, `keys revoke` and `usage` in turn, as an operator would while the load runs."""
    n = 0
    while not stop.is_set():
        n += 1
        for args in (("keys", "create", "--label", f"side-{n}"), ("keys", "revoke", f"side-{n}"), ("usage",)):
            outcome = q2api(data_dir, *args)
            done.append(f"{' '.join(args[:2])}: exit {outcome.returncode}")


async def one_request(http: httpx2.AsyncClient, n: int, key: str) -> tuple[int, str | None]:
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}", "x-api-key": key}
    if n % 2 == 0:
        body: dict[str, Any] = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        response = await http.post("/v1/messages", json=body, headers=headers)
        return response.status_code, None
    body = {"model": MODEL, "input": "hi", "store": True}
    response = await http.post("/v1/responses", json=body, headers=headers)
    stored = response.json().get("id") if response.status_code == 200 else None
    return response.status_code, stored


async def load(base_url: str, key: str, requests: int, concurrency: int) -> tuple[collections.Counter[int], list[str]]:
    statuses: collections.Counter[int] = collections.Counter()
    stored: list[str] = []
    queue = iter(range(requests))
    limits = httpx2.Limits(max_connections=concurrency)
    async with httpx2.AsyncClient(base_url=base_url, timeout=60, limits=limits) as http:

        async def client() -> None:
            for n in queue:
                try:
                    status, response_id = await one_request(http, n, key)
                except httpx2.HTTPError:
                    status, response_id = 0, None
                statuses[status] += 1
                if response_id:
                    stored.append(response_id)

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return statuses, stored


async def unretrievable(base_url: str, key: str, ids: list[str]) -> int:
    missing = 0
    headers = {"authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(base_url=base_url, timeout=60) as http:
        for response_id in ids:
            if (await http.get(f"/v1/responses/{response_id}", headers=headers)).status_code != 200:
                missing += 1
    return missing


def run_once(name: str, requests: int, concurrency: int, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="q2api-store-runs-") as tmp, SimulatedUpstream.run_in_thread() as upstream:
        tmp_path = Path(tmp)
        data_dir = tmp_path / "data"
        upstream.sim.responder = lambda record: scripts.stream(
            scripts.conversation_event(), scripts.text_events("ok"), scripts.usage_event(10, 2)
        )
        key = ENV_KEY
        if name != "env-key":
            created = q2api(
                data_dir, "keys", "create", "--label", "loadkey", "--rpm", "100000",
                "--max-concurrent", "50", "--credits-per-day", "100000",
            )  # fmt: skip
            if created.returncode != 0:
                raise SystemExit(f"keys create failed: {created.stderr}")
            key = created.stdout.strip()
        stop = threading.Event()
        side: list[str] = []
        with serve(tmp_path, upstream.env(), workers=workers, client_key=ENV_KEY) as server:
            beside = threading.Thread(target=cli_beside, args=(data_dir, stop, side), daemon=True)
            if name == "store-key+cli":
                beside.start()
            started = time.monotonic()
            statuses, stored = asyncio.run(load(server.base_url, key, requests, concurrency))
            seconds = time.monotonic() - started
            stop.set()
            if beside.is_alive():
                beside.join(timeout=120)
            missing = asyncio.run(unretrievable(server.base_url, key, stored))
            lines = list(server.lines)
        usage = q2api(data_dir, "usage", "--by", "key", "--format", "json")
        try:
            ledger = {row["key"]: row["requests"] for row in json.loads(usage.stdout or "[]")}
        except ValueError:
            ledger = {"usage failed": usage.stderr.strip()[-120:]}
        try:
            with sqlite3.connect(data_dir / "q2api.sqlite3") as db:
                integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        except sqlite3.Error as exc:
            integrity = f"{type(exc).__name__}: {exc}"
        return {
            "run": name,
            "workers": workers,
            "seconds": round(seconds, 1),
            "statuses": dict(sorted(statuses.items())),
            "store_warnings": sum(bool(STORE_FAILURE.search(line)) for line in lines),
            "stored": len(stored),
            "not_retrievable": missing,
            "ledger": ledger,
            "integrity": integrity,
            "cli_beside": collections.Counter(side),
            "examples": [line for line in lines if STORE_FAILURE.search(line)][:3],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=30)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only", choices=RUNS, action="append", help="run only these (repeatable)")
    args = parser.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    print(f"{'run':<15} {'w':>2} {'s':>6}  {'answers':<24} {'store WARN':>10} {'unretr.':>8}  {'ledger':<30} integrity")
    for name in args.only or RUNS:
        result = run_once(name, args.requests, args.concurrency, args.workers)
        answers = " ".join(f"{count}x{status}" for status, count in result["statuses"].items())
        print(
            f"{result['run']:<15} {result['workers']:>2} {result['seconds']:>6}  {answers:<24} "
            f"{result['store_warnings']:>10} {result['not_retrievable']:>3}/{result['stored']:<4}  "
            f"{json.dumps(result['ledger']):<30} {result['integrity']}"
        )
        for example in result["examples"]:
            print(f"    e.g. {example[:200]}")
        if result["cli_beside"]:
            print(f"    CLI beside: {dict(result['cli_beside'])}")


if __name__ == "__main__":
    main()
