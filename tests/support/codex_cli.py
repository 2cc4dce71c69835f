"""The real Codex CLI (`@openai/codex`, pinned) pointed at the gateway, with no way out to the internet.

    result = await run_codex_exec(tmp_path, base_url=gw.base_url, api_key=CLIENT_KEY, prompt="…")

Codex is configured in a temporary CODEX_HOME, one of three ways (`Provider`):

* `README`: the README's `model_provider` — `base_url` the gateway, `wire_api = "responses"`, the key in
  an environment variable (`env_key`). Codex 0.171.0 then speaks HTTP (SSE) and asks for no catalogue;
* `COMMAND_AUTH`: the same provider with its key from a command (`auth.command`), which makes Codex
  read the gateway's catalogue (`GET /v1/models?client_version=…`) and so offer `apply_patch` as a
  custom tool; `websockets=True` adds `supports_websockets = true`, and Codex speaks the WebSocket;
* `OPENAI`: Codex's built-in `openai` provider pointed at the gateway (`openai_base_url`, the key in
  CODEX_API_KEY): the WebSocket first, as for OpenAI.

Update checks, web search, analytics and plugins are off. Every proxy variable points at `NoWayOut`, a loopback listener that refuses and
records whatever Codex tries to reach beyond 127.0.0.1 (NO_PROXY keeps the gateway direct); a
test asserts it recorded nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.support.npm_tools import NpmTool, installed

# Pinned: the wire format a test passes with is the one it was written against.
CODEX = NpmTool("@openai/codex", "0.171.0", "codex")
CODEX_MODEL = "claude-sonnet-5-5"
KEY_VARIABLE = "Q2API_KEY"
EXEC_TIMEOUT = 180.0


def codex_binary() -> Path:
    return installed(CODEX)


class Provider(enum.Enum):
    README = "README"  # the README's custom provider, its key in an environment variable
    COMMAND_AUTH = "command auth"  # the same, its key from a command: Codex reads the gateway's catalogue
    OPENAI = "openai"  # Codex's built-in provider, pointed at the gateway


def codex_config(
    base_url: str, *, web_search: bool = False, provider: Provider = Provider.README, websockets: bool = False
) -> str:
    """The CODEX_HOME `config.toml` for the gateway at `base_url`: the README's for `Provider.README`."""
    lines = [f'model = "{CODEX_MODEL}"']
    if provider is Provider.OPENAI:
        lines.append(f'openai_base_url = "{base_url}/v1"')
    else:
        lines.append('model_provider = "q2api"')
    lines.append("check_for_update_on_startup = false")
    if not web_search:
        lines.append('web_search = "disabled"')
    lines += [
        "",
        # What Codex 0.171 reaches on its own otherwise: ab.chatgpt.com (analytics), github.com and
        # chatgpt.com (the plugin marketplaces); NoWayOut recorded each of them.
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
    ]
    if provider is not Provider.OPENAI:
        lines += [
            "",
            "[model_providers.q2api]",
            'name = "q2api"',
            f'base_url = "{base_url}/v1"',
            'wire_api = "responses"',
        ]
        if websockets:
            lines.append("supports_websockets = true")
        if provider is Provider.README:
            lines.append(f'env_key = "{KEY_VARIABLE}"')
        else:
            lines += ["", "[model_providers.q2api.auth]", 'command = "printenv"', f'args = ["{KEY_VARIABLE}"]']
    return "\n".join(lines) + "\n"


class NoWayOut:
    """A loopback 'proxy' that refuses every connection and records where it was meant to go."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._server: asyncio.base_events.Server | None = None
        self.url = ""

    async def __aenter__(self) -> NoWayOut:
        self._server = await asyncio.start_server(self._refuse, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            first = await asyncio.wait_for(reader.readline(), timeout=5)
            self.attempts.append(first.decode("latin-1").strip() or "(a connection that sent nothing)")
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        writer.close()


@dataclasses.dataclass(frozen=True)
class CodexRun:
    returncode: int
    events: list[dict[str, Any]]  # `codex exec --json` lines
    stderr: str
    outside_attempts: list[str]  # what Codex tried to reach beyond loopback (must stay empty)

    def items(self, kind: str) -> list[dict[str, Any]]:
        return [
            event["item"]
            for event in self.events
            if event.get("type") == "item.completed" and event["item"].get("type") == kind
        ]


@contextlib.asynccontextmanager
async def codex_home(root: Path, base_url: str, **options: Any) -> AsyncIterator[Path]:
    home = root / "codex-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(codex_config(base_url, **options))
    yield home


async def run_codex_exec(root: Path, *, base_url: str, api_key: str, prompt: str, **options: Any) -> CodexRun:
    """`codex exec --json PROMPT` in a fresh work folder under `root` (`root / "work"`), its shell
    unsandboxed (the test's folder). `options`: `codex_config`'s."""
    binary = codex_binary()
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    async with NoWayOut() as outside, codex_home(root, base_url, **options) as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root),
            "CODEX_HOME": str(home),
            KEY_VARIABLE: api_key,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        if options.get("provider") is Provider.OPENAI:
            env["CODEX_API_KEY"] = api_key  # what `codex exec` takes for the built-in provider
        for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env[variable] = outside.url
        process = await asyncio.create_subprocess_exec(
            str(binary),
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
            "--json",
            prompt,
            cwd=work,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=EXEC_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
    events = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    return CodexRun(process.returncode or 0, events, stderr.decode(), list(outside.attempts))
