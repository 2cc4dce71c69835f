"""Redacted by construction: a simulated upstream that puts secrets and text everywhere — in replies,
field names, event kinds, error codes and messages, the catalogue, credits, profiles, search results —
and none of it reaches the report (nor the final guard, which would mean the construction leaked)."""

from __future__ import annotations

import orjson

from q2api.amazonq.eventstream import encode_event
from q2api.probe import bodies
from q2api.testing import scripts
from q2api.testing.scripts import ErrorReply, Send
from q2api.testing.simulated_services import catalogue_entry, profile_entry, usage_document
from tests.support.probe_world import API_KEY, probe_world

EMAIL = "alice.smith@example.com"
ACCOUNT_NUMBER = "123456789012"
PROFILE_ARN = f"arn:aws:codewhisperer:us-east-1:{ACCOUNT_NUMBER}:profile/ALICEPROFILE7"
SOCIAL_REFRESH = "aorAAAAAGsocialRefreshTokenSecret0123456789"
IDC_REFRESH = "aorAAAAAGidcRefreshTokenSecret9876543210"
REPLY_TEXT = "The quarterly numbers for Project Nightingale are attached below"
REASONING_TEXT = "Thinking privately about Project Nightingale and its budget"


def leaky_world_setup(world):
    sim = world.sim
    sim.kiro_profile_arn = PROFILE_ARN
    secrets = sorted(sim.valid_access_tokens)

    def everywhere() -> str:
        tokens = " ".join(sorted(sim.valid_access_tokens))
        return f"{REPLY_TEXT}. token {tokens} refresh {SOCIAL_REFRESH} {IDC_REFRESH} key {API_KEY} for {EMAIL} on {PROFILE_ARN}"

    def responder(record):
        body = record.body if isinstance(record.body, dict) else {}
        said = scripts.current_user_text(body)
        token = record.access_token or "none"
        if record.port == world.hosts["other"].port:
            message = f"{everywhere()} You said: {said}"
            document = {"__type": f"com.amazon#{token}", "message": message, "reason": EMAIL, token: EMAIL}
            return ErrorReply(403, orjson.dumps(document), {"x-amzn-errortype": f"{token}:http://x/"})
        state = body.get("conversationState", {})
        if state.get("history") and "toolResults" in str(state):
            message = f"{everywhere()} You said: {said}"
            return scripts.http_error(400, "ValidationException", message, reason=token)
        frames = [
            scripts.conversation_event(token),
            scripts.event("assistantResponseEvent", {"content": f"{everywhere()} You said: {said}"}),
            scripts.event("assistantResponseEvent", {token: EMAIL, EMAIL: token, "content": REPLY_TEXT}),
            Send(encode_event(token, {"detail": everywhere()})),
            Send(encode_event(EMAIL, {"x": 1})),
        ]
        if "additionalModelRequestFields" in body:
            frames.insert(1, scripts.event("reasoningContentEvent", {"text": REASONING_TEXT}))
            frames.insert(
                2, scripts.event("reasoningContentEvent", {"signature": token + "-signature-" + SOCIAL_REFRESH})
            )
        if (state.get("currentMessage", {}).get("userInputMessage", {}).get("userInputMessageContext") or {}).get(
            "tools"
        ):
            frames.append(scripts.tool_use_events(token, token, {EMAIL: everywhere()}))
        frames.append(
            scripts.event("metadataEvent", {"tokenUsage": {"outputTokens": 3, token: 1, "note": everywhere()}})
        )
        frames.append(scripts.event("meteringEvent", {"unit": token, "usage": 0.01, "who": EMAIL}))
        return scripts.stream(*frames)

    sim.responder = responder
    sim.usage_frames = False
    leaky = catalogue_entry("claude-sonnet-4.5", name=f"Sonnet for {EMAIL} {SOCIAL_REFRESH}")
    leaky["description"] = everywhere()
    leaky[EMAIL] = SOCIAL_REFRESH
    leaky["supportedInputTypes"] = ["TEXT", SOCIAL_REFRESH]
    leaky_reasoning = catalogue_entry(
        "claude-opus-4.8", reasoning_schema=sim.services.catalogue[3].get("additionalModelRequestFieldsSchema")
    )
    sim.services.catalogue = [leaky, leaky_reasoning]
    sim.services.default_model = "claude-sonnet-4.5"
    usage = usage_document(1, 50, subscription=f"KIRO PRO for {EMAIL} {IDC_REFRESH} {PROFILE_ARN}")
    usage[EMAIL] = IDC_REFRESH
    sim.services.usage = usage
    sim.services.profiles = [profile_entry(PROFILE_ARN, name=f"{EMAIL}'s profile")]
    sim.mcp.results_by_query[bodies.SEARCH_QUERY] = [
        {"title": everywhere(), "url": f"https://example.test/{EMAIL}", "snippet": REPLY_TEXT, EMAIL: SOCIAL_REFRESH}
    ]
    return secrets


async def test_no_secret_and_no_text_reaches_the_report(tmp_path):
    async with probe_world(tmp_path, "q", "other") as world:
        leaky_world_setup(world)
        await world.add("social", label=EMAIL, refresh_token=SOCIAL_REFRESH)
        await world.add("idc", label="work", refresh_token=IDC_REFRESH)
        await world.add("api_key")
        outcome = await world.probe()
        tokens = sorted(world.sim.valid_access_tokens)
    assert len(tokens) >= 2
    report = outcome.text
    forbidden = [
        *tokens,
        API_KEY,
        SOCIAL_REFRESH,
        IDC_REFRESH,
        "sim-client-secret",
        EMAIL,
        ACCOUNT_NUMBER,
        PROFILE_ARN,
        "ALICEPROFILE7",
        REPLY_TEXT,
        REASONING_TEXT,
        "Project Nightingale",
        *(
            prompt
            for prompt in (bodies.PLAIN_PROMPT, bodies.TOOL_PROMPT, bodies.THINKING_PROMPT, bodies.THINKING_FOLLOW_UP)
        ),
        bodies.SEARCH_QUERY,
        "You said",
    ]
    leaked = [secret for secret in forbidden if secret in report]
    assert leaked == []
    assert outcome.redactor.guarded == 0  # nothing was left for the last guard: redacted as it was built
    # The report still says what happened: shapes, statuses, the redaction markers where text stood.
    hosts = outcome.hosts()
    assert hosts["other"]["status"] == 403 and hosts["other"]["error"]["code"] == "‹redacted›"
    text_events = outcome.step("text")["events"]
    assert [event["kind"] for event in text_events][:3] == [
        "messageMetadataEvent",
        "assistantResponseEvent",
        "‹redacted›",
    ]
    assert "‹redacted›" in text_events[1]["fields"] and "content" in text_events[1]["fields"]
    assert hosts["other"]["error"]["message"] == "‹withheld: it quoted prompt or reply text›"
    assert outcome.step("credits")["used"] == 1
    progress = "\n".join(outcome.progress)
    assert [
        secret for secret in [*tokens, API_KEY, SOCIAL_REFRESH, ACCOUNT_NUMBER, REPLY_TEXT] if secret in progress
    ] == []


async def test_a_refused_login_is_reported_without_its_label(tmp_path):
    async with probe_world(tmp_path, "q") as world:
        world.sim.refresh_failure = "invalid_grant"
        await world.add("idc", label="Alice Smith")
        outcome = await world.probe()
        calls = world.upstream_calls
    account = outcome.account()
    assert account["stopped"]["why"] == "no_token" and account["steps"] == []
    assert "can no longer refresh its access token" in account["stopped"]["detail"]
    assert calls == 0
    assert "Alice Smith" not in outcome.text and "Alice" not in outcome.text
    assert any("not probed: RefreshRejected" in line for line in outcome.progress)
