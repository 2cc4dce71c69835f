"""A checked reply held to its end (q2api.translation.held_reply): released, repaired once, or failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import StreamEvent
from q2api.anthropic.reply_content import ReplyContent, Undecided
from q2api.translation.held_reply import Failed, HeldReply, Repair


@dataclass
class WantsJson:
    fail_with: AnthropicError | None = None
    judged: list[ReplyContent] = field(default_factory=list)

    def problem(self, content: ReplyContent) -> str | None:
        self.judged.append(content)
        return None if content.text.startswith("{") else "not JSON"

    def repair_prompt(self, problem: str) -> str:
        return f"fix: {problem}"

    def failure(self, problem: str) -> AnthropicError | None:
        return self.fail_with


def reply(text: str) -> list[StreamEvent]:
    """A whole text reply's events after `message_start`, as the translator writes them."""
    return [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]


def test_a_good_reply_is_released_whole_once_it_ends() -> None:
    held = HeldReply(WantsJson())
    events = reply('{"a": 1}')
    assert held.take(events[:2]) == [] and held.holding
    assert held.take(events[2:]) == events and not held.holding


def test_a_wrong_reply_is_repaired_once_then_failed_or_released() -> None:
    error = AnthropicError(422, "still wrong")
    held = HeldReply(WantsJson(fail_with=error))
    verdict = held.take(reply("prose"))
    assert isinstance(verdict, Repair) and verdict.prompt == "fix: not JSON" and verdict.content.text == "prose"
    assert held.take(reply("prose again")) == Failed(error)

    releasing = HeldReply(WantsJson(fail_with=None))  # a door that judges the final reply itself
    assert isinstance(releasing.take(reply("prose")), Repair)
    again = reply("prose again")
    assert releasing.take(again) == again


def test_a_broken_reply_is_released_without_judging() -> None:
    check = WantsJson()
    held = HeldReply(check)
    broken: list[StreamEvent] = [*reply("partial")[:2], {"type": "content_block_stop", "index": 0}]
    broken.append({"type": "error", "error": {"type": "api_error", "message": "upstream broke"}})
    assert held.take(broken) == broken and check.judged == []


@dataclass
class CannotDecide(WantsJson):
    """A check whose schema is too costly to finish: it cannot say whether the reply is right."""

    def problem(self, content: ReplyContent) -> str | None:
        self.judged.append(content)
        return Undecided("could not be checked in time")

    def repair_prompt(self, problem: str) -> str | None:
        return None if isinstance(problem, Undecided) else f"fix: {problem}"


def test_a_reply_the_check_could_not_decide_asks_for_no_repair_turn() -> None:
    error = AnthropicError(422, "could not be checked")
    assert HeldReply(CannotDecide(fail_with=error)).take(reply("{}")) == Failed(error)
    released = reply("{}")
    assert HeldReply(CannotDecide(fail_with=None)).take(released) == released  # the door judges it itself
