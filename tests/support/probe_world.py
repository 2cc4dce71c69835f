"""`q2api probe` against the simulated Amazon Q: a simulator with the hosts a test names, a store with
the accounts it names, and the probe's entry function run on them (the CLI tests run `main` instead).

    async with probe_world(tmp_path, "runtime", "q", "gone") as world:
        await world.add("idc")
        outcome = await world.probe()
        outcome.document      # the report as written (parsed JSON)
        outcome.text          # … and as text
        world.upstream_calls  # HTTP calls that reached the simulated Amazon Q (token services aside)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from q2api.accounts.opening import open_account_store
from q2api.accounts.records import Account
from q2api.accounts.store_protocol import AccountStore
from q2api.probe.redaction import Redactor
from q2api.probe.report import ProbeReport, serialise
from q2api.probe.runner import ProbeOptions, run_probe
from q2api.settings import Settings, load_settings
from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SimulatedUpstream

TOKEN_PATHS = frozenset({"/token", "/refreshToken", "/client/register", "/device_authorization"})
API_KEY = "ksk_probe0test0key0a1b2c3d4e5f6a7b8c9d0"


def model_like_reply(record: RecordedRequest) -> scripts.Reply | None:
    """A model that uses the tool it is offered: a request offering tools and carrying no tool results is
    answered with a call of the first tool (its required string properties set to "ok"); others fall
    through to the simulator's own replies (the echo, with native reasoning when asked)."""
    body = record.body if isinstance(record.body, dict) else {}
    current = body.get("conversationState", {}).get("currentMessage", {}).get("userInputMessage", {})
    context = current.get("userInputMessageContext") or {}
    tools = [tool["toolSpecification"] for tool in context.get("tools") or () if "toolSpecification" in tool]
    if not tools or context.get("toolResults"):
        return None
    spec = tools[0]
    schema = spec["inputSchema"]["json"]
    arguments = dict.fromkeys(schema.get("required", ()), "ok")
    # No usage event of its own: the simulator's closing frames bring one (`usage_frames`).
    return scripts.stream(
        scripts.conversation_event(), scripts.tool_use_events("tooluse_probe_1", spec["name"], arguments)
    )


@dataclasses.dataclass
class ProbeOutcome:
    report: ProbeReport | None
    text: str
    document: dict[str, Any]
    progress: list[str]
    redactor: Redactor

    def account(self, index: int = 0) -> dict[str, Any]:
        account: dict[str, Any] = self.document["accounts"][index]
        return account

    def step(self, name: str, index: int = 0) -> dict[str, Any]:
        return next(step for step in self.account(index)["steps"] if step["step"] == name)

    def hosts(self, index: int = 0) -> dict[str, dict[str, Any]]:
        """The hosts step's findings by host kind."""
        return {finding["kind"]: finding for finding in self.step("hosts", index)["hosts"]}


class ProbeWorld:
    def __init__(self, sim: SimulatedUpstream, store: AccountStore, data_dir: Path, endpoint: str) -> None:
        self.sim = sim
        self.store = store
        self.data_dir = data_dir
        self.endpoint = endpoint
        self.hosts: dict[str, HostRules] = {}

    async def add(self, login: str, *, label: str | None = None, **options: Any) -> Account:
        """An account of `login`: social, idc, builder_id (an IdC login without a profile) or api_key."""
        if login == "api_key":
            key = options.pop("key", API_KEY)
            self.sim.add_api_key(key)
            return await self.store.add(
                auth_method="api_key", refresh_token=None, access_token=key, label=label or login, **options
            )
        if login in ("idc", "builder_id"):
            refresh_token = options.pop("refresh_token", f"refresh-{login}")
            if login == "builder_id":
                self.sim.services.builder_id_accounts.add(refresh_token)
            return await self.store.add(
                auth_method="idc",
                refresh_token=refresh_token,
                client_id=SIM_CLIENT_ID,
                client_secret=SIM_CLIENT_SECRET,
                label=label or login,
                **options,
            )
        return await self.store.add(
            auth_method="social",
            refresh_token=options.pop("refresh_token", "refresh-social"),
            label=label or login,
            **options,
        )

    def settings(self, **extra: str) -> Settings:
        env = {
            "Q2API_DATA_DIR": str(self.data_dir),
            "AMAZONQ_ENDPOINT": self.endpoint,
            "AMAZONQ_OIDC_ENDPOINT": self.sim.oidc_url,
            "AMAZONQ_KIRO_REFRESH_ENDPOINT": self.sim.kiro_refresh_url,
            "Q2API_CONNECT_TIMEOUT": "2",
            **extra,
        }
        return load_settings(env, env_file=None)

    async def probe(self, options: ProbeOptions | None = None, **extra: str) -> ProbeOutcome:
        redactor = Redactor()
        progress: list[str] = []
        report = await run_probe(self.settings(**extra), options or ProbeOptions(), redactor, progress.append)
        text = serialise(report, redactor).decode() if report is not None else ""
        return ProbeOutcome(report, text, orjson.loads(text) if text else {}, progress, redactor)

    @property
    def upstream_calls(self) -> int:
        """HTTP calls that reached the simulated Amazon Q (inference, catalogue, credits, profiles, MCP)."""
        return sum(count for path, count in self.sim.calls.items() if path not in TOKEN_PATHS)


@contextlib.asynccontextmanager
async def probe_world(tmp_path: Path, *kinds: str, usage_frames: bool = True) -> AsyncIterator[ProbeWorld]:
    """A simulator whose hosts are `kinds` in order ("runtime", "q", "other", "gone"; none: the simulator's
    own address), and an empty store beside it."""
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.usage_frames = usage_frames  # the closing frames (usage, metering, context) of a real reply
        sim.responder = model_like_reply
        entries = []
        rules: dict[str, HostRules] = {}
        for kind in kinds:
            if kind == "gone":
                entries.append(f"q={sim.gone.url()}")
                continue
            host = HostRules.runtime() if kind == "runtime" else HostRules.legacy_q() if kind == "q" else HostRules()
            await sim.add_host(host)
            rules[kind] = host
            entries.append(host.override_entry)
        endpoint = ",".join(entries) or sim.url
        data_dir = tmp_path / "store"
        store = await open_account_store(None, data_dir, None)
        try:
            world = ProbeWorld(sim, store, data_dir, endpoint)
            world.hosts = rules
            yield world
        finally:
            await store.close()
