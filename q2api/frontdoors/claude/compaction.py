"""Compaction, emulated: the conversation summarised by the model, and read back from its `compaction` block.

Anthropic's compaction (`context_management.edits[]` `compact_20260112`, and the top-level
`compaction` parameter) replaces the older turns of a conversation with a summary the model
writes. Amazon Q has none, so the gateway does it with the model's help:

* when it is due — `compaction` asks for it outright; `compact_20260112` once the request's
  estimated input exceeds its trigger (150,000 tokens by default, at least 50,000) —
  `compaction_due` says so, and the reply first makes one upstream call of its own with
  `summary_request`: the conversation and the instruction to summarise it (the request's
  `instructions` replace the gateway's). The reply opens with a `compaction` block holding that
  summary. With `pause_after_compaction` (always, for `compaction`) it ends there,
  `stop_reason: "compaction"`; otherwise it goes on with `continued_request`: the model's turn
  goes on from the summary alone, as it will on the next turn;
* on every request, `read_back` finds the last `compaction` block with a summary (a block whose
  `content` is null is a failed compaction, which changes nothing): what came before it is left
  out, the summary becomes the conversation's first (user) turn, and the blocks after it go on
  in their message's role. The cache breakpoints follow the messages they were on.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import CompactEdit, CompactionBlock, Message, MessagesRequest, TextBlock

COMPACT_TRIGGER = 150_000  # input tokens, Anthropic's default
COMPACT_TRIGGER_MINIMUM = 50_000
SUMMARY_MAX_TOKENS = 16_384
SUMMARY_PROMPT = (
    "Your context is about to be compacted: everything above will be replaced by the summary you write now, "
    "and the work goes on from it. Write that summary. Keep whatever is needed to carry on without the "
    "transcript: the task and the user's requests and preferences, decisions made and why, the state of the "
    "work (files, commands, results, errors and how they were resolved), what is still to do and the very next "
    "step. Be complete but concise. Write only the summary, inside <summary></summary> tags; call no tool."
)
_SUMMARY_PREFACE = (
    "This conversation was compacted: the turns before this point are replaced by their summary, below. "
    "Carry on from where it stands."
)


@dataclass(frozen=True, slots=True)
class CompactionAsk:
    """The reply summarises the conversation before anything else."""

    instructions: str  # what the model is told to write
    pause: bool  # the reply is the `compaction` block alone (`stop_reason: compaction`)


def summary_context(summary: str) -> str:
    """The summary as the first turn of the conversation that goes on from it."""
    return f"{_SUMMARY_PREFACE}\n\n<summary>\n{summary}\n</summary>"


def summary_of(reply: str) -> str | None:
    """The summary in the summarising call's reply text (inside its <summary> tags, if it used them); None if empty."""
    start, end = reply.find("<summary>"), reply.rfind("</summary>")
    text = reply[start + len("<summary>") : end] if 0 <= start < end else reply
    return text.strip() or None


def compaction_due(request: MessagesRequest) -> CompactionAsk | None:
    """Whether this request's reply starts by compacting (and how); raises InvalidRequest for a bad trigger."""
    if request.compaction is not None:
        instructions = (request.compaction.instructions or "").strip()
        return CompactionAsk(instructions or SUMMARY_PROMPT, pause=True)
    edits = request.context_management.edits if request.context_management is not None else None
    for index, edit in enumerate(edits or ()):
        if not isinstance(edit, CompactEdit):
            continue
        trigger = edit.trigger.value if edit.trigger is not None else COMPACT_TRIGGER
        if trigger < COMPACT_TRIGGER_MINIMUM:
            raise InvalidRequest(
                f"context_management.edits.{index}.trigger.value",
                f"must be at least {COMPACT_TRIGGER_MINIMUM} input tokens",
            )
        if estimate_request_tokens(request) > trigger:
            instructions = (edit.instructions or "").strip()
            return CompactionAsk(instructions or SUMMARY_PROMPT, pause=bool(edit.pause_after_compaction))
    return None


def summary_request(request: MessagesRequest, ask: CompactionAsk) -> MessagesRequest:
    """The request of the summarising call: the conversation, then the instruction, and no thinking."""
    return msgspec.structs.replace(
        request,
        messages=[*request.messages, Message(role="user", content=[TextBlock(text=ask.instructions)])],
        max_tokens=min(request.max_tokens, SUMMARY_MAX_TOKENS) or SUMMARY_MAX_TOKENS,
        thinking=None,
        output_config=None,
        stop_sequences=None,
        context_management=None,
        compaction=None,
        stream=False,
    )


def continued_request(request: MessagesRequest, summary: str) -> MessagesRequest:
    """The request of the call that goes on after the summary: the summary alone, as the next turn reads it back."""
    return msgspec.structs.replace(
        request,
        messages=[Message(role="user", content=[TextBlock(text=summary_context(summary))])],
        context_management=None,
        compaction=None,
    )


def read_back(request: MessagesRequest, breakpoints: CacheBreakpoints) -> tuple[MessagesRequest, CacheBreakpoints]:
    """The request as the conversation goes on from its last compaction block (unchanged without one)."""
    found = _last_compaction(request.messages)
    if found is None:
        return request, breakpoints
    message_index, block_index, summary = found
    message = request.messages[message_index]
    content = message.content
    assert isinstance(content, list)
    rest = content[block_index + 1 :]
    messages = [Message(role="user", content=[TextBlock(text=summary_context(summary))])]
    if rest:
        messages.append(msgspec.structs.replace(message, content=rest))
    shift = len(messages) - message_index - 1  # new index - old index, for the messages after it
    messages.extend(request.messages[message_index + 1 :])

    def moved(point: tuple[int, int]) -> tuple[int, int] | None:
        at, block = point
        if at > message_index:
            return at + shift, block
        if at == message_index and block == block_index:
            return 0, 0
        if at == message_index and block > block_index:
            return 1, block - block_index - 1
        return None

    marks = tuple(point for point in map(moved, breakpoints.messages) if point is not None)
    return (
        msgspec.structs.replace(request, messages=messages),
        CacheBreakpoints(breakpoints.system, breakpoints.tools, marks),
    )


def _last_compaction(messages: list[Message]) -> tuple[int, int, str] | None:
    for message_index in range(len(messages) - 1, -1, -1):
        content = messages[message_index].content
        if not isinstance(content, list):
            continue
        for block_index in range(len(content) - 1, -1, -1):
            block = content[block_index]
            if type(block) is CompactionBlock:
                if block.content == "":
                    raise InvalidRequest(
                        f"messages.{message_index}.content.{block_index}.content",
                        "a compaction block's content may not be empty (null is a compaction that failed)",
                    )
                if block.content is not None:
                    return message_index, block_index, block.content
    return None
