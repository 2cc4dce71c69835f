"""Access and refresh tokens through the real gateway: single-flight refresh, rejection recovery, rotation.

The simulated upstream checks bearer tokens (`check_tokens=True`): only tokens
its own token service issued are accepted, anything else gets Amazon Q's real
403 "bearer token invalid". The client is the official SDK throughout.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx2
import pytest

from q2api.accounts.records import ENV_ACCOUNT_ID, EnvAccount
from q2api.accounts.store import SqliteAccountStore
from q2api.store.sqlite_database import DB_FILENAME
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.gateway_harness import CLIENT_KEY, MODEL, ask, capture_logs, find_secrets, gateway, sdk


async def test_twenty_concurrent_requests_share_one_refresh(tmp_path) -> None:
    # The gateway starts with an access token Amazon Q does not accept.
    async with SimulatedUpstream(check_tokens=True, refresh_delay=0.05) as sim:
        async with gateway(sim, tmp_path, AMAZONQ_ACCESS_TOKEN="operator-supplied-stale-token") as url:
            client = sdk(url)
            replies = await asyncio.gather(*(ask(client, f"question {n}") for n in range(20)))
            assert all(f"question {n}" in reply for n, reply in enumerate(replies))
            assert sim.refresh_calls == 1

            # Later every issued token is revoked at once: again one refresh for the whole burst.
            sim.revoke_access_tokens()
            replies = await asyncio.gather(*(ask(client, f"again {n}", stream=n % 2 == 1) for n in range(20)))
            assert all(f"again {n}" in reply for n, reply in enumerate(replies))
            assert sim.refresh_calls == 2

    # Every call that reached Amazon Q with a valid token used the one token of its generation.
    accepted = {record.access_token for record in sim.requests} & sim.valid_access_tokens
    assert len(accepted) == 1


async def test_a_token_rejected_mid_life_is_refreshed_once_and_the_call_repeated(tmp_path) -> None:
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path) as url:
        client = sdk(url)
        await ask(client, "warm up")
        assert sim.refresh_calls == 1
        sim.enqueue(scripts.bearer_invalid(), scripts.text_reply("after the refresh"))
        assert await ask(client) == "after the refresh"
        rejected, repeated = sim.requests[-2:]
        assert sim.refresh_calls == 2
        assert rejected.access_token != repeated.access_token
        assert len(sim.requests) == 3


async def test_a_token_rejected_again_after_the_refresh_is_a_401_without_a_refresh_loop(tmp_path) -> None:
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path) as url:
        sim.enqueue(scripts.bearer_invalid(), scripts.bearer_invalid(), scripts.bearer_invalid())
        with capture_logs() as logs, pytest.raises(anthropic.AuthenticationError) as caught:
            await ask(sdk(url))
    assert caught.value.body["error"]["type"] == "authentication_error"
    # One refresh at start-up, one after the rejection; the second rejection ends it.
    assert sim.refresh_calls == 2
    assert len(sim.requests) == 2
    assert find_secrets(logs.text) == [] and find_secrets(caught.value.response.text) == []


async def test_a_rotated_refresh_token_is_stored_and_survives_a_restart(tmp_path) -> None:
    data_dir = tmp_path / "data"
    async with SimulatedUpstream(check_tokens=True, rotate_refresh_tokens=True) as sim:
        sim.valid_refresh_tokens = {SIM_REFRESH_TOKEN}
        async with gateway(sim, data_dir) as url:
            await ask(sdk(url))
        (rotated,) = sim.valid_refresh_tokens  # the service retired the original one
        assert rotated != SIM_REFRESH_TOKEN
        assert (await SqliteAccountStore(data_dir).get(ENV_ACCOUNT_ID)).refresh_token == rotated

        # A new process with the same environment (still the original refresh token),
        # and no usable access token: only the stored, rotated refresh token can help.
        sim.revoke_access_tokens()
        async with gateway(sim, data_dir) as url:
            assert "restarted" in await ask(sdk(url), "restarted")
        assert sim.refresh_calls == 2
        assert sim.refresh_requests[-1].body["refreshToken"] == rotated


async def test_the_store_is_private_to_its_owner(tmp_path) -> None:
    data_dir = tmp_path / "fresh" / "data"
    async with SimulatedUpstream() as sim, gateway(sim, data_dir) as url:
        await ask(sdk(url))  # a refresh wrote tokens to the store
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        files = list(data_dir.rglob("*"))  # the store, its locks, the usage ledger's journal
        assert data_dir / DB_FILENAME in files and data_dir / "usage-journal" in files
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


async def test_kiro_social_login_refreshes_end_to_end(tmp_path) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.kiro_profile_arn = "arn:aws:codewhisperer:us-east-1:111111111111:profile/KIRO"
        async with gateway(sim, tmp_path, auth_method="social") as url:
            client = sdk(url)
            assert "kiro" in await ask(client, "kiro")
            sim.revoke_access_tokens()  # expired early: the Kiro refresh runs again
            assert "still kiro" in await ask(client, "still kiro", stream=True)
    assert [record.path for record in sim.refresh_requests] == ["/refreshToken", "/refreshToken"]
    assert sim.refresh_requests[0].body == {"refreshToken": SIM_REFRESH_TOKEN}
    # The profile ARN the Kiro service returned goes with every call.
    assert {record.body["profileArn"] for record in sim.requests} == {sim.kiro_profile_arn}


# ------------------------------------------------------------------ several worker processes


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_workers(url: str, process: subprocess.Popen, log_path: Path, workers: int, timeout: float = 20.0) -> None:
    """Until every worker has finished start-up (each logs "q2api ready") and the port answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"q2api serve exited early ({process.returncode}): {log_path.read_text()}")
        if log_path.read_text(errors="replace").count("q2api ready") >= workers:
            try:
                if httpx2.get(url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"q2api serve did not come up: {log_path.read_text()}")


async def test_two_worker_processes_share_one_data_dir(tmp_path: Path) -> None:
    # Rotation on: if both workers refreshed on their own, the second would spend a
    # refresh token the first had already retired and fail. They must share one refresh.
    with SimulatedUpstream.run_in_thread(check_tokens=True, rotate_refresh_tokens=True) as upstream:
        upstream.sim.valid_refresh_tokens = {SIM_REFRESH_TOKEN}
        port = _free_port()
        env = {key: value for key, value in os.environ.items() if not key.startswith(("AMAZONQ_", "Q2API_"))}
        env.update(upstream.env(), Q2API_DATA_DIR=str(tmp_path / "data"), Q2API_API_KEYS=CLIENT_KEY)
        # No start-up catalogue read: the workers' first token must be taken by requests, not by start-up.
        env["Q2API_MODEL_DISCOVERY"] = "false"
        log_path = tmp_path / "stderr.log"
        with open(log_path, "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "q2api", "serve", "--port", str(port), "--workers", "2"],
                cwd=tmp_path,  # no stray .env
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        try:
            url = f"http://127.0.0.1:{port}"
            # Both workers up before the first request: each starts without an access token.
            await asyncio.to_thread(_wait_for_workers, url, process, log_path, 2)
            # A new connection per request, arriving a little apart: a worker woken by a
            # burst of connections would otherwise accept them all. Repeat until the
            # second worker has served one (it then adopts the first one's token).
            client = anthropic.AsyncAnthropic(
                base_url=url, api_key=CLIENT_KEY, max_retries=0, default_headers={"Connection": "close"}
            )

            async def staggered(n: int) -> str:
                await asyncio.sleep(0.005 * n)
                message = await client.messages.create(
                    model=MODEL, max_tokens=50, messages=[{"role": "user", "content": f"w{n}"}]
                )
                return message.content[0].text

            for _burst in range(5):
                replies = await asyncio.gather(*(staggered(n) for n in range(20)))
                assert all(f"w{n}" in reply for n, reply in enumerate(replies))
                if "refreshed by another worker" in log_path.read_text(errors="replace"):
                    break
            await client.close()
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert upstream.sim.refresh_calls == 1
    log = log_path.read_text(errors="replace")
    assert "refreshed by another worker" in log, log
    assert "database is locked" not in log
    assert "Traceback" not in log
    assert find_secrets(log) == []
    # The workers log in the configured format, request fields included.
    assert "request_id=req_" in log


def _open_store_when_released(data_dir: str, release, failures) -> None:
    release.wait()
    try:
        store = SqliteAccountStore(data_dir)
        asyncio.run(
            store.seed_from_env(EnvAccount(auth_method="idc", refresh_token="r", client_id="c", client_secret="s"))
        )
    except Exception as exc:  # reported to the test process
        failures.put(f"{type(exc).__name__}: {exc}")


def test_workers_starting_together_all_open_a_fresh_store(tmp_path: Path) -> None:
    # What `serve --workers N` does on first start, N processes at the same instant, many times over:
    # creating the directory and switching the new file to WAL must not fail for the later ones.
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    for round_ in range(15):
        release = context.Event()
        data_dir = str(tmp_path / f"round-{round_}" / "data")
        processes = [
            context.Process(target=_open_store_when_released, args=(data_dir, release, failures)) for _ in range(4)
        ]
        for process in processes:
            process.start()
        release.set()
        for process in processes:
            process.join(timeout=20)
            assert process.exitcode == 0
    reported = []
    while not failures.empty():
        reported.append(failures.get())
    assert reported == []
