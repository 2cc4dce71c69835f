"""One line per event, at the level it deserves: what a newcomer's first requests write to the log."""

from __future__ import annotations

from pathlib import Path

import httpx2
import openai

from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, capture_logs, gateway, sdk


def _warnings(logs) -> list[str]:
    return [line.message for line in logs.lines if line.level in ("WARNING", "ERROR")]


async def test_a_substituted_model_is_one_warning_the_first_time_and_quiet_after(tmp_path: Path) -> None:
    # Claude Code names a model the catalogue lacks on every request (its background haiku, a newer id).
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path) as url:
        client = sdk(url)
        with capture_logs() as logs:
            for _ in range(3):
                await client.messages.create(
                    model="claude-sonnet-9-9", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
                )
    [warning] = _warnings(logs)
    assert warning.startswith("model substituted: requested=claude-sonnet-9-9 upstream=")
    # Each request's own line still names what served it.
    served = [line for line in logs.lines if line.message.startswith("POST /v1/messages")]
    assert len(served) == 3 and all(line.extra["upstream_model"] != "-" for line in served)


async def test_an_openai_request_without_max_tokens_logs_no_clamp(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=CLIENT_KEY, max_retries=0)
        with capture_logs() as logs:
            await client.chat.completions.create(
                model="claude-sonnet-5-5", messages=[{"role": "user", "content": "hi"}]
            )
            await client.chat.completions.create(
                model="claude-sonnet-5-5", max_completion_tokens=1_000_000, messages=[{"role": "user", "content": "hi"}]
            )
    clamps = [line for line in logs.lines if line.message.startswith("max_tokens clamped")]
    # The door's own "no limit" is lowered quietly; a client that asked for a million hears about it.
    assert [line.level for line in clamps] == ["DEBUG", "INFO"]
    assert "requested=1000000" in clamps[1].message


async def test_console_polls_of_the_admin_api_are_debug_lines(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as url:
        async with httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            with capture_logs() as logs:
                for path in ("/admin/api/accounts", "/admin/api/activity", "/console", "/console/app.js"):
                    assert (await http.get(path)).status_code == 200, path
                # Claude Code's connectivity probe at each start: a 404 it expects, not news.
                assert (await http.head("/api/hello")).status_code == 404
                patched = await http.patch("/admin/api/accounts/env", json={"label": "renamed"})
                assert patched.status_code == 200, patched.text
    request_lines = [line for line in logs.lines if line.message.startswith(("GET ", "PATCH ", "HEAD "))]
    assert {line.message: line.level for line in request_lines} == {
        "GET /admin/api/accounts": "DEBUG",
        "GET /admin/api/activity": "DEBUG",
        "GET /console": "DEBUG",
        "GET /console/app.js": "DEBUG",
        "HEAD /api/hello": "DEBUG",
        "PATCH /admin/api/accounts/env": "INFO",  # a change stays visible
    }
