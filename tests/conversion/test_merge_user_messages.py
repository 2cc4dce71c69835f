"""`claude_converter.merge_user_messages`: consecutive user messages become one `userInputMessage`
and nothing of any of them is lost — the step where the infinite tool loop of
TROUBLESHOOTING_INFINITE_LOOP.md was born (a merge that kept only the first message's results).

The property test generates an assistant turn with parallel tool calls followed by a run of user
messages holding text, images, tool results (answering those calls, answering one twice, or
answering a call that is gone) and system turns, gathers the run as the converter does
(`TurnBuilder`), and checks what `merge_user_messages` makes of it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.amazonq.types import MAX_IMAGES_PER_MESSAGE, UserInputMessage
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import merge_user_messages
from q2api.conversion.identifiers import Identifiers
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.text import CANCELLED_TOOL_RESULT
from q2api.conversion.turns import TurnBuilder, UserTurn
from tests.support.converter_helpers import table_options


@dataclass
class Run:
    """A conversation ending in a run of user messages, and what their merge must carry."""

    messages: list[dict[str, Any]]
    calls: list[str]  # the client ids of the assistant turn's tool calls, in order
    results: dict[str, list[str]] = field(default_factory=dict)  # call id -> texts of every result for it
    errors: set[str] = field(default_factory=set)  # call ids some result marked is_error
    orphans: list[tuple[str, list[str]]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # in the order they were sent
    images: list[str] = field(default_factory=list)


@st.composite
def user_runs(draw: st.DrawFn) -> Run:
    counter = iter(range(1_000_000))

    def marker(prefix: str) -> str:
        return f"{prefix}{next(counter)}Z"

    calls = [marker("toolu_") for _ in range(draw(st.integers(0, 5)))]
    assistant = [{"type": "tool_use", "id": call, "name": "Bash", "input": {"command": call}} for call in calls]
    run = Run(
        [{"role": "user", "content": "start"}, {"role": "assistant", "content": assistant or "ok"}],
        calls,
    )
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 5)) == 0:
            value = marker("SYS")
            run.texts.append(value)
            run.messages.append({"role": "system", "content": value})
            continue
        blocks: list[dict[str, Any]] = []
        kinds = st.sampled_from(["text", "image", "result", "result", "result", "orphan"])
        for kind in draw(st.lists(kinds, min_size=1, max_size=6)):
            if kind == "text":
                value = marker("USR")
                run.texts.append(value)
                blocks.append({"type": "text", "text": value})
            elif kind == "image":
                data = base64.b64encode(marker("IMG").encode()).decode()
                run.images.append(data)
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
            else:
                texts = [marker("RES") for _ in range(draw(st.integers(0, 2)))]
                is_error = draw(st.booleans())
                if kind == "result" and calls:
                    call = draw(st.sampled_from(calls))  # may answer a call twice: a duplicate
                    run.results.setdefault(call, []).extend(texts)
                    if is_error:
                        run.errors.add(call)
                else:
                    call = marker("gone_")
                    run.orphans.append((call, texts))
                content = [{"type": "text", "text": value} for value in texts]
                blocks.append({"type": "tool_result", "tool_use_id": call, "content": content, "is_error": is_error})
        run.messages.append({"role": "user", "content": blocks})
    return run


def merged(run: Run) -> tuple[UserInputMessage, list[Finding], dict[str, str]]:
    """The run's messages gathered into their turn as the converter gathers them, then merged;
    with the findings and the Amazon Q id of each tool call (client id -> Q id)."""
    request = parse_messages_request(
        orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 9, "messages": run.messages})
    )
    report: list[Finding] = []
    builder = TurnBuilder(Identifiers(report), 1_000_000, report)
    for index, message in enumerate(request.messages):
        builder.add(index, message)
    turn = builder.turns[-1]
    assert isinstance(turn, UserTurn) and turn.message_indices == list(range(2, len(run.messages)))
    q_ids = {client_id: q_id for q_id, (client_id, _) in turn.expected.items()}
    return merge_user_messages(turn, table_options(), report), report, q_ids


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(user_runs())
def test_every_tool_result_text_and_image_of_every_merged_message_is_carried(run: Run):
    message, report, q_ids = merged(run)

    # One toolResult per call of the assistant turn, in the calls' order, each with every result given for it.
    results = (message.get("userInputMessageContext") or {}).get("toolResults", [])
    assert [result["toolUseId"] for result in results] == [q_ids[call] for call in run.calls]
    for call, result in zip(run.calls, results, strict=True):
        carried = [block["text"] for block in result["content"]]
        if call in run.results:
            assert [text for text in carried if text.startswith("RES")] == run.results[call]
            assert result["status"] == ("error" if call in run.errors else "success")
        else:
            assert carried == [CANCELLED_TOOL_RESULT] and result["status"] == "error"

    # Text, system text and results whose call is gone: all in the content, in the order sent.
    content = message["content"]
    positions = [content.index(text) for text in run.texts]
    assert positions == sorted(positions)
    for call, texts in run.orphans:
        assert call in content and all(text in content for text in texts)

    # Images: every one sent, or reported as dropped past the per-message cap.
    sent = [image["source"]["bytes"] for image in message.get("images", [])]
    dropped = [finding for finding in report if finding.kind == FindingKind.IMAGE_DROPPED]
    assert len(sent) <= MAX_IMAGES_PER_MESSAGE
    assert set(sent) <= set(run.images) and len(sent) + len(dropped) == len(run.images)


def test_two_user_messages_each_answering_one_call_carry_both_results():
    """The seed's case: Claude Code's results for two parallel calls arriving in two user messages."""
    run = Run(
        [
            {"role": "user", "content": "start"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_05", "name": "Bash", "input": {"command": "git status"}},
                    {"type": "tool_use", "id": "toolu_06", "name": "Bash", "input": {"command": "git log"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_05", "content": "clean"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_06", "content": "3f2a1c9"}]},
            {"role": "user", "content": "and now?"},
        ],
        ["toolu_05", "toolu_06"],
    )
    message, report, _ = merged(run)
    assert message["userInputMessageContext"]["toolResults"] == [
        {"toolUseId": "toolu_05", "content": [{"text": "clean"}], "status": "success"},
        {"toolUseId": "toolu_06", "content": [{"text": "3f2a1c9"}], "status": "success"},
    ]
    assert message["content"] == "and now?"
    assert [finding.kind for finding in report] == [FindingKind.MERGED_USER_TURN, FindingKind.MERGED_USER_TURN]
