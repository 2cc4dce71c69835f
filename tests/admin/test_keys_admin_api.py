"""`/admin/api/keys` and `/admin/api/usage` (the admin envelope and auth of every admin route), and the
per-key `/metrics` counters (store keys only: their labels are bounded by the operator)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx2
import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import ADMIN_KEY, JSON_BODY, MODEL, capture_logs, eventually, open_gateway
from tests.support.metrics_scrape import Scrape

pytestmark = pytest.mark.asyncio


@pytest.mark.slow  # waits out the gateway's two-second key cache
async def test_keys_through_the_admin_api(tmp_path: Path) -> None:
    async with (
        open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gw,
        httpx2.AsyncClient(base_url=gw.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20) as admin,
        httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as client,
    ):
        assert (await client.get("/admin/api/keys")).status_code == 401  # the admin key, as every admin route
        with capture_logs() as logs:
            created = await admin.post(
                "/admin/api/keys", json={"label": "api-made", "models": [MODEL], "rpm": 5, "credits_per_day": 2.5}
            )
        assert created.status_code == 201
        key = created.json()["key"]
        assert key.startswith("q2k_") and created.json()["status"] == "active"
        assert key not in logs.text
        listed = (await admin.get("/admin/api/keys")).json()["keys"]
        assert [entry["label"] for entry in listed] == ["api-made"] and "key" not in listed[0]
        assert listed[0]["credits_today"] == 0.0 and listed[0]["credits_per_day"] == 2.5

        bad = await admin.post("/admin/api/keys", json={"label": "x", "rpm": -1})
        assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("rpm:")
        clash = await admin.post("/admin/api/keys", json={"label": "api-made"})
        assert clash.status_code == 409
        unknown = await admin.post("/admin/api/keys", json={"label": "y", "rmp": 1})
        assert unknown.status_code == 400 and "rmp" in unknown.json()["error"]["message"]
        assert (await admin.get("/admin/api/keys/nobody")).status_code == 404

        patched = await admin.patch("/admin/api/keys/api-made", json={"rpm": None, "tpm": 10000})
        assert patched.status_code == 200 and patched.json()["rpm"] is None and patched.json()["tpm"] == 10000
        assert (await admin.get("/admin/api/keys/api-made")).json()["credits_per_day"] == 2.5  # left as it was

        gw.sim.enqueue(
            scripts.stream(
                scripts.conversation_event(),
                scripts.text_events("ok"),
                scripts.usage_event(7, 3),
                scripts.metering_event(0.2),
            )
        )
        body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        answered = await client.post("/v1/messages", json=body, headers={**JSON_BODY, "x-api-key": key})
        assert answered.status_code == 200
        deadline = time.monotonic() + 10
        while (await admin.get("/admin/api/keys/api-made")).json()["credits_today"] != pytest.approx(0.2):
            assert time.monotonic() < deadline, "the reply's credits were never counted"
            await asyncio.sleep(0.02)  # they are, just after the reply, off the request's path

        usage = (await admin.get("/admin/api/usage?by=key&since=24h")).json()
        assert [(row["key"], row["requests"], row["credits"]) for row in usage["rows"]] == [("api-made", 1, 0.2)]
        assert (await admin.get("/admin/api/usage?by=colour")).status_code == 400
        assert (await admin.get("/admin/api/usage?since=yesterday")).json()["error"]["message"].startswith("since:")
        overview = (await admin.get("/admin/api/usage/overview?range=24h&stack=model")).json()
        assert overview["requests"] == 1 and overview["stacks"][0]["name"] == MODEL

        scrape = Scrape((await client.get("/metrics")).text)
        assert scrape.total("q2api_key_requests_total", key="api-made", status="200") == 1
        assert scrape.total("q2api_key_tokens_total", key="api-made", direction="output") == 3
        assert scrape.total("q2api_key_credits_total", key="api-made") == pytest.approx(0.2)
        assert key not in (await client.get("/metrics")).text

        revoked = await admin.delete("/admin/api/keys/api-made")
        assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
        await eventually(lambda: client.post("/v1/messages", json=body, headers={**JSON_BODY, "x-api-key": key}), 401)
