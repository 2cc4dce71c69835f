"""The soak's operators: the command line in another terminal, and the admin API and console polled.

The command line writes into the store the gateway is serving from, as docs/clients.md and
docs/deployment.md tell users to: keys made, changed, listed and revoked, the usage ledger read, an
account imported from a kiro-cli login. The admin poller reads what the console reads, as often as
a console left open would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

import aiohttp

from bench.soak.clients import KEY_LIMITS, Traffic
from bench.soak.deployments import ADMIN_KEY, Fleet
from bench.soak.journal import Answer, CommandRun, Journal
from tests.support.credential_files import cli_database, kiro_cli_social_entries

ADMIN_PAGES = (
    "/admin/api/accounts",
    "/admin/api/keys",
    "/admin/api/usage",
    "/admin/api/usage/overview",
    "/admin/api/activity",
    "/console",
    "/metrics",
    "/readyz",
)
IMPORTED_LABEL = "soak-imported"


def imported_access_token(fleet: Fleet) -> str:
    """The access token the imported login carries: the simulator sees it on every call that account serves."""
    return f"soak-imported-access-{fleet.deployment.slug}"


async def create_keys(fleet: Fleet) -> dict[str, str]:
    """The clients' store keys, made through the admin API of the first process."""
    keys: dict[str, str] = {}
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        for label, limits in KEY_LIMITS.items():
            async with session.post(f"{fleet.targets[0]}/admin/api/keys", json={"label": label, **limits}) as answer:
                document = await answer.json()
                if answer.status != 201:
                    raise RuntimeError(f"the admin API did not make key {label}: {answer.status} {document}")
                keys[label] = document["key"]
    return keys


async def _command(fleet: Fleet, journal: Journal, *args: str) -> CommandRun:
    started = time.time()
    completed = await asyncio.to_thread(fleet.cli, *args)
    run = CommandRun(args, completed.returncode, completed.stderr[-400:], started, time.time())
    journal.commands.append(run)
    return run


async def command_line(traffic: Traffic, seconds: float) -> None:
    """Key chores in a loop; meanwhile an account imported at 10 % of the run, and the probed key revoked at 15 %
    (early: a command takes seconds to start on a busy machine, and both must be judged while traffic runs)."""
    await asyncio.gather(
        _chores(traffic), _at(0.1 * seconds, _import_account(traffic)), _at(0.15 * seconds, _revoke(traffic))
    )


async def _at(delay: float, work: Awaitable[None]) -> None:
    await asyncio.sleep(delay)
    await work


async def _chores(traffic: Traffic) -> None:
    fleet, journal = traffic.fleet, traffic.journal
    chore = 0
    while traffic.running():
        label = f"soak-chore-{chore}"
        chore += 1
        await _command(fleet, journal, "keys", "create", "--label", label, "--rpm", "1000")
        await _command(fleet, journal, "keys", "update", label, "--rpm", "2000")
        await _command(fleet, journal, "keys", "list", "--json")
        await _command(fleet, journal, "usage", "--format", "json")
        await _command(fleet, journal, "keys", "revoke", label)


async def _import_account(traffic: Traffic) -> None:
    """A kiro-cli login imported into the running fleet's store, with an access token only it carries."""
    fleet = traffic.fleet
    login = cli_database(
        fleet.scratch / "kiro-cli" / "data.sqlite3",
        {
            name: {**entry, "access_token": imported_access_token(fleet)}
            for name, entry in kiro_cli_social_entries(f"soak-imported-refresh-{fleet.deployment.slug}").items()
        },
    )
    run = await _command(
        fleet, traffic.journal, "accounts", "import", "--kiro-cli", str(login), "--label", IMPORTED_LABEL
    )
    if run.returncode == 0:
        traffic.journal.imported[IMPORTED_LABEL] = run.ended


async def _revoke(traffic: Traffic) -> None:
    run = await _command(traffic.fleet, traffic.journal, "keys", "revoke", "soak-revoke")
    if run.returncode == 0:
        traffic.journal.revoked["soak-revoke"] = run.ended


async def admin_polls(traffic: Traffic, interval: float = 0.25) -> None:
    """The console's reads, one every `interval` seconds, on every process in turn."""
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=30)) as session:
        turn = 0
        while traffic.running():
            target = traffic.fleet.targets[turn % len(traffic.fleet.targets)]
            page = ADMIN_PAGES[turn % len(ADMIN_PAGES)]
            turn += 1
            started = time.time()
            try:
                async with session.get(target + page) as answer:
                    await answer.read()
                    status, error = answer.status, "" if answer.status == 200 else (await answer.text())[:200]
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, error = 0, f"{type(exc).__name__}: {exc}"
            traffic.journal.polls.append(
                Answer("admin-poll", "(admin)", page, target, status, started, time.time(), error=error)
            )
            await asyncio.sleep(interval)
