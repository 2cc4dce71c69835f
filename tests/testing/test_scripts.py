"""The simulator's default echo reply, as `q2api demo --serve` shows it to a real client."""

from __future__ import annotations

from q2api.testing import scripts


def _reply_text(reply: scripts.StreamReply) -> str:
    import orjson

    return "".join(
        orjson.loads(step.data[step.data.index(b"{") : step.data.rindex(b"}") + 1]).get("content", "")
        for step in reply.steps
        if isinstance(step, scripts.Send) and b"assistantResponseEvent" in step.data
    )


def test_the_echo_quotes_what_the_user_typed_not_claude_codes_reminders() -> None:
    # Claude Code puts its context in <system-reminder> blocks before the user's words.
    content = (
        "<system-reminder>\nAs you answer, use this context: …\n</system-reminder>\nhello from claude code"
        "\n\n<system_message>\n# Environment\nYou have been invoked …\n</system_message>"
    )
    body = {"conversationState": {"currentMessage": {"userInputMessage": {"content": content}}}}
    text = _reply_text(scripts.echo_reply(body))
    assert text.endswith("You said: hello from claude code")
    assert "system-reminder" not in text and "system_message" not in text
