"""Capture on failure, end to end: the real gateway on loopback, the simulated Amazon Q answering 400,
the official SDK as client; then the capture read by the admin API and by `q2api replay` /
`q2api captures` run in-process.

What a capture must never hold is searched for in the file itself: every secret the gateway knows
(client key, admin key, refresh and access tokens, client secret), the Authorization header, the
profile ARN's account, the image bytes sent (their base64), and — with text redaction — the text.
"""

from __future__ import annotations

import base64
import stat

import anthropic
import httpx2
import pytest

from q2api.settings import CaptureMode
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SIM_CLIENT_SECRET, SIM_PROFILE_ARN, SIM_REFRESH_TOKEN
from tests.support.captures import environment, run_cli, wait_for_capture
from tests.support.converter_helpers import assistant, tool_result, tool_use
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, MODEL, capture_logs, open_gateway, user
from tests.support.tool_sessions import SEED_ROUND, session

# A real PNG made large and unlike anything else in the request, so a leak of any part of it shows.
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40).decode()
SECRET_TEXT = "the launch codes are 8b1f-quartz-elephant"
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}}]


def failing_conversation():
    """A conversation the converter repairs in several ways: a data-URL image, a tool name in another case."""
    return [
        user([{"type": "text", "text": SECRET_TEXT}]),
        assistant([tool_use("toolu_1", "read", {"file_path": "/etc/motd"})]),
        {
            "role": "user",
            "content": [
                tool_result("toolu_1", "welcome"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": f"data:image/png;base64,{IMAGE}"},
                },
                {"type": "text", "text": "what does the screenshot show?"},
            ],
        },
    ]


def gateway_env(tmp_path, **extra):
    return {
        "Q2API_ADMIN_KEY": ADMIN_KEY,
        "Q2API_MAX_RETRIES": "0",
        "Q2API_CAPTURE_DIR": str(tmp_path / "captures"),
        **extra,
    }


def secrets_of(gw):
    return [CLIENT_KEY, ADMIN_KEY, SIM_REFRESH_TOKEN, SIM_CLIENT_SECRET, *gw.sim.valid_access_tokens]


async def capture_a_400(tmp_path, **env):
    """One request Amazon Q refuses as malformed; returns (gateway settings env, capture document, path, logs)."""
    async with open_gateway(tmp_path, auth_method="social", **gateway_env(tmp_path, **env)) as gw:
        gw.sim.enqueue(scripts.improperly_formed())
        with capture_logs() as logs, pytest.raises(anthropic.BadRequestError) as refused:
            await gw.client.messages.create(model=MODEL, max_tokens=100, tools=TOOLS, messages=failing_conversation())
        [line] = logs.eventually_for_request(refused.value.request_id)[-1:]
        capture_id = line.extra["capture"]
        document = await wait_for_capture(tmp_path / "captures", capture_id)
        async with httpx2.AsyncClient(
            base_url=gw.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=10
        ) as admin:
            activity = (await admin.get("/admin/api/activity")).json()["requests"]
        return gw, document, tmp_path / "captures" / f"{capture_id}.json", line, activity


async def test_a_simulated_upstream_400_is_captured_with_no_secret_and_no_image_data(tmp_path):
    gw, document, path, line, activity = await capture_a_400(tmp_path)
    text = path.read_text()
    for secret in secrets_of(gw):
        assert secret not in text, "a secret in the capture"
    assert "Bearer sim-" not in text and "Authorization" in text  # the header is there, its token is not
    assert IMAGE not in text and IMAGE[1000:1100] not in text, "image bytes in the capture"
    assert SIM_PROFILE_ARN not in text and "000000000000" not in text  # the ARN's account is masked
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # What a bug report needs is all there.
    assert document["summary"]["reasons"] == ["upstream_rejected"]
    assert document["summary"]["upstream_status"] == 400
    assert document["upstream_response"]["message"] == "Improperly formed request."
    assert document["client_response"]["status"] == 400
    assert SECRET_TEXT in text  # text is kept unless Q2API_CAPTURE_REDACT_TEXT is on
    assert document["gateway"]["settings"]["api_keys"] == "1 key(s)"
    assert document["gateway"]["settings"]["admin_key"] == "set"
    kinds = {finding["kind"] for finding in document["conversion"]["findings"]}
    assert {"image_data_url_stripped", "tool_name_case_merged"} <= kinds
    assert "  Current: USER (toolResults: 1: toolu_1)" in document["conversion"]["debug_summary"]
    [placeholder_in_client, placeholder_upstream] = document["placeholders"]
    assert placeholder_in_client["prefix"] == "data:image/png;base64," and placeholder_in_client["valid_base64"]
    assert placeholder_in_client["characters"] == len(IMAGE) == placeholder_upstream["characters"]
    [attempt] = document["upstream_attempts"]
    assert attempt["host"] == gw.sim.url.split("//")[1].rstrip("/") and attempt["status"] == 400
    # Named in the request's log line and in the admin activity.
    assert line.message.startswith("POST /v1/messages") and line.extra["capture"] == document["summary"]["id"]
    assert activity[0]["capture"] == document["summary"]["id"]


async def test_replay_convert_only_on_the_capture_shows_the_same_findings(tmp_path):
    _, document, path, _, _ = await capture_a_400(tmp_path)
    status, out, _ = await run_cli("replay", str(path), "--convert-only", "--diff", cwd=tmp_path)
    assert status == 0, out
    assert f"Same findings as when captured ({len(document['conversion']['findings'])})." in out
    assert "=== Message Conversion Debug ===" in out
    assert "The Amazon Q request the current version builds is the one captured." in out


async def test_replay_sends_the_captured_request_again_with_a_fresh_token_of_the_configured_account(tmp_path):
    _, document, path, _, _ = await capture_a_400(tmp_path)
    async with open_gateway(tmp_path / "other") as replay_target:  # a fresh simulator: the account must log in anew
        sim = replay_target.sim
        sim.enqueue(scripts.text_reply("it works now"))
        env = {**sim.env("social"), "Q2API_DATA_DIR": str(tmp_path / "replay-data")}
        with environment(env):
            status, out, err = await run_cli("replay", str(path), cwd=tmp_path)
    assert status == 0, out + err
    assert "Amazon Q answered 200" in out and "it works now" in out
    sent = sim.requests[-1]
    assert sent.access_token in sim.valid_access_tokens  # a token of this account, refreshed for the replay
    assert sent.access_token not in path.read_text()
    body = sent.body
    assert body["profileArn"] == SIM_PROFILE_ARN  # the account's own, not the masked one
    assert body["conversationState"] == {
        **document["upstream_request"]["body"]["conversationState"],
        "currentMessage": body["conversationState"]["currentMessage"],
    }
    [sent_image] = body["conversationState"]["currentMessage"]["userInputMessage"]["images"]
    assert len(sent_image["source"]["bytes"]) == len(IMAGE)  # a same-size placeholder image, not the original
    assert sent_image["source"]["bytes"] != IMAGE
    assert base64.b64decode(sent_image["source"]["bytes"]).startswith(b"\x89PNG")


async def test_replay_says_so_when_amazon_q_still_refuses(tmp_path):
    _, _, path, _, _ = await capture_a_400(tmp_path)
    async with open_gateway(tmp_path / "other") as target:
        target.sim.enqueue(scripts.improperly_formed())
        with environment({**target.sim.env("social"), "Q2API_DATA_DIR": str(tmp_path / "replay-data")}):
            status, out, _ = await run_cli("replay", str(path), cwd=tmp_path)
    assert status == 1
    assert "Amazon Q refused it again: HTTP 400 ValidationException" in out


async def test_text_redaction_leaves_the_users_text_out_and_replay_still_finds_the_same(tmp_path):
    _, document, path, _, _ = await capture_a_400(tmp_path, Q2API_CAPTURE_REDACT_TEXT="true")
    text = path.read_text()
    assert SECRET_TEXT not in text and "launch" not in text and "welcome" not in text and "/etc/motd" not in text
    assert document["summary"]["text_redacted"] is True
    assert document["upstream_request"]["rebuilt_from_redacted_text"] is True
    redacted = document["client_request"]["body"]["messages"][0]["content"][0]["text"]
    assert len(redacted) == len(SECRET_TEXT) and redacted.count(" ") == SECRET_TEXT.count(" ")
    assert document["client_request"]["body"]["tools"] == TOOLS  # tool definitions are not the user's text
    status, out, _ = await run_cli("replay", str(path), "--convert-only", "--diff", cwd=tmp_path)
    assert status == 0 and "Same findings as when captured" in out, out
    assert "is the one captured" in out


async def test_a_loop_the_guard_finds_is_captured_though_the_request_succeeds(tmp_path):
    async with open_gateway(tmp_path, **gateway_env(tmp_path)) as gw:
        gw.sim.enqueue(scripts.text_reply("done"))
        with capture_logs() as logs:
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=session([SEED_ROUND] * 4))
        [line] = logs.request_lines()
        document = await wait_for_capture(tmp_path / "captures", line.extra["capture"])
    assert document["summary"]["reasons"] == ["tool_loop"] and document["summary"]["status"] == 200
    assert [finding["kind"] for finding in document["conversion"]["findings"]][-1] == "tool_loop_cycle"
    status, out, _ = await run_cli(
        "replay", str(tmp_path / "captures" / f"{line.extra['capture']}.json"), "--convert-only", cwd=tmp_path
    )
    assert status == 0 and "Same findings as when captured" in out


async def test_a_block_mode_refusal_is_captured_with_its_loop(tmp_path):
    async with open_gateway(tmp_path, **gateway_env(tmp_path, Q2API_LOOP_MODE="block")) as gw:
        with capture_logs() as logs, pytest.raises(anthropic.BadRequestError):
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=session([SEED_ROUND] * 4))
        [line] = logs.request_lines()
        document = await wait_for_capture(tmp_path / "captures", line.extra["capture"])
    assert document["conversion"]["refused"].startswith("Tool loop detected:")
    assert document["upstream_request"] is None and document["client_response"]["status"] == 400


@pytest.mark.parametrize(
    ("mode", "captured"), [(CaptureMode.FAILURES, False), (CaptureMode.ALL, True), (CaptureMode.OFF, False)]
)
async def test_which_successful_requests_are_captured_follows_q2api_capture(tmp_path, mode, captured):
    async with open_gateway(tmp_path, **gateway_env(tmp_path, Q2API_CAPTURE=str(mode))) as gw:
        gw.sim.enqueue(scripts.text_reply("fine"))
        with capture_logs() as logs:
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=[user("hello")])
        [line] = logs.request_lines()
        if captured:
            document = await wait_for_capture(tmp_path / "captures", line.extra["capture"])
            assert document["summary"]["reasons"] == ["all"] and document["upstream_request"] is not None
        else:
            assert "capture" not in line.extra


async def test_off_mode_writes_nothing_even_for_a_400(tmp_path):
    async with open_gateway(tmp_path, **gateway_env(tmp_path, Q2API_CAPTURE="off")) as gw:
        gw.sim.enqueue(scripts.improperly_formed())
        with pytest.raises(anthropic.BadRequestError):
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=[user("hello")])
    assert not (tmp_path / "captures").exists()


@pytest.mark.parametrize(
    "reply", [scripts.throttled(), scripts.bearer_invalid(), scripts.context_overflow(), scripts.monthly_quota()]
)
async def test_the_accounts_own_failures_and_a_context_overflow_are_not_captured(tmp_path, reply):
    async with open_gateway(tmp_path, **gateway_env(tmp_path)) as gw:
        gw.sim.enqueue(reply, reply, reply)
        with capture_logs() as logs, pytest.raises(anthropic.APIStatusError):
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=[user("hello")])
        [line] = logs.request_lines()
    assert "capture" not in line.extra


async def test_the_admin_api_lists_downloads_and_removes_captures(tmp_path):
    async with open_gateway(tmp_path, **gateway_env(tmp_path)) as gw:
        gw.sim.enqueue(scripts.improperly_formed())
        with capture_logs() as logs, pytest.raises(anthropic.BadRequestError):
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=[user("hello")])
        capture_id = logs.request_lines()[0].extra["capture"]
        await wait_for_capture(tmp_path / "captures", capture_id)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx2.AsyncClient(base_url=gw.base_url, headers=headers, timeout=10) as admin:
            listing = (await admin.get("/admin/api/captures")).json()
            assert [entry["id"] for entry in listing["captures"]] == [capture_id]
            assert listing["captures"][0]["reasons"] == ["upstream_rejected"] and listing["mode"] == "failures"
            download = await admin.get(f"/admin/api/captures/{capture_id}")
            assert download.status_code == 200 and download.json()["summary"]["id"] == capture_id
            assert f'filename="{capture_id}.json"' in download.headers["content-disposition"]
            assert (await admin.get("/admin/api/captures/../../etc/passwd")).status_code == 404
            assert (await admin.delete(f"/admin/api/captures/{capture_id}")).status_code == 204
            assert (await admin.get(f"/admin/api/captures/{capture_id}")).status_code == 404
            assert (await admin.delete(f"/admin/api/captures/{capture_id}")).status_code == 404
            unauthorized = await admin.get("/admin/api/captures", headers={"Authorization": f"Bearer {CLIENT_KEY}"})
            assert unauthorized.status_code == 401


async def test_the_captures_commands_list_show_and_remove(tmp_path):
    _, document, path, _, _ = await capture_a_400(tmp_path)
    capture_id = document["summary"]["id"]
    with environment({"Q2API_CAPTURE_DIR": str(path.parent)}):
        status, out, err = await run_cli("captures", "list", cwd=tmp_path)
        assert status == 0 and capture_id in out and "upstream_rejected" in out
        assert str(path.parent) in err
        status, out, _ = await run_cli("captures", "show", document["summary"]["request_id"], cwd=tmp_path)
        assert status == 0 and "Improperly formed request." in out and f"q2api replay {capture_id}" in out
        status, out, _ = await run_cli(
            "replay", capture_id[:20], "--convert-only", cwd=tmp_path
        )  # by a start of its id
        assert status == 0 and "Same findings" in out
        status, _, _ = await run_cli("captures", "rm", capture_id, cwd=tmp_path)
        assert status == 0 and not path.exists()
        assert (await run_cli("captures", "show", capture_id, cwd=tmp_path))[0] == 1


async def test_a_chat_completions_request_is_captured_and_replays_through_its_own_door(tmp_path):
    image_url = f"data:image/png;base64,{IMAGE}"
    body = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": SECRET_TEXT},
                    {"type": "image_url", "image_url": {"url": image_url}},
                ],
            },
        ],
    }
    async with open_gateway(tmp_path, **gateway_env(tmp_path)) as gw:
        gw.sim.enqueue(scripts.improperly_formed())
        async with gw.http() as http:
            with capture_logs() as logs:
                response = await http.post("/v1/chat/completions", json=body)
        assert response.status_code == 400
        [line] = [line for line in logs.lines if line.message.startswith("POST /v1/chat/completions")]
        document = await wait_for_capture(tmp_path / "captures", line.extra["capture"])
    path = tmp_path / "captures" / f"{line.extra['capture']}.json"
    assert document["summary"]["route"] == "/v1/chat/completions"
    assert IMAGE not in path.read_text() and CLIENT_KEY not in path.read_text()
    sent_url = document["client_request"]["body"]["messages"][1]["content"][1]["image_url"]["url"]
    assert sent_url.startswith("data:image/png;base64,<q2api placeholder:")
    status, out, _ = await run_cli("replay", str(path), "--convert-only", "--diff", cwd=tmp_path)
    assert status == 0 and "Same findings as when captured" in out and "is the one captured" in out, out


async def test_a_responses_request_is_captured_and_replays_through_its_own_door(tmp_path):
    body = {
        "model": MODEL,
        "instructions": "Be brief.",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": SECRET_TEXT},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"},
                ],
            },
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd": "ls"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
        ],
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
    }
    async with open_gateway(tmp_path, **gateway_env(tmp_path)) as gw:
        gw.sim.enqueue(scripts.improperly_formed())
        async with gw.http() as http:
            with capture_logs() as logs:
                response = await http.post("/v1/responses", json=body)
        assert response.status_code == 400
        [line] = [line for line in logs.lines if line.message.startswith("POST /v1/responses")]
        document = await wait_for_capture(tmp_path / "captures", line.extra["capture"])
    path = tmp_path / "captures" / f"{line.extra['capture']}.json"
    assert document["summary"]["route"] == "/v1/responses"
    assert IMAGE not in path.read_text() and CLIENT_KEY not in path.read_text()
    status, out, _ = await run_cli("replay", str(path), "--convert-only", "--diff", cwd=tmp_path)
    assert status == 0 and "Same findings as when captured" in out and "is the one captured" in out, out


async def test_a_refused_signature_retried_without_the_reasoning_is_not_captured(tmp_path):
    """The retry without the history's reasoning answers the request: the refusal before it is no failure of it,
    and a session whose signatures another account made would otherwise write a capture of every turn."""
    async with open_gateway(tmp_path, **gateway_env(tmp_path)) as gw:
        first = await gw.client.messages.create(
            model="claude-opus-4-8", max_tokens=1024, thinking={"type": "adaptive"}, messages=[user("plan it")]
        )
        gw.sim.reasoning.reject_signatures = True
        follow_up = [
            user("plan it"),
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
            user("go on"),
        ]
        with capture_logs() as logs:
            second = await gw.client.messages.create(
                model="claude-opus-4-8", max_tokens=1024, thinking={"type": "adaptive"}, messages=follow_up
            )
            [line] = logs.request_lines()[-1:]
    assert second.stop_reason == "end_turn" and len(gw.sim.requests) == 3  # refused, then retried
    assert line.extra["upstream_attempts"] == 2
    assert "capture" not in line.extra
    assert not (tmp_path / "captures").exists()
