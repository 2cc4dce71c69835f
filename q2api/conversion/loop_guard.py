"""The loop guard: a model stuck repeating tool calls, found at the tail of the client's conversation.

A *round* is the tool calls of one assistant turn together with the results the next user turn
gave them. Two rounds are the same when they hold the same calls (tool name + canonical input,
in any order) and those calls got the same results. Two patterns count as a loop:

- a **cycle**: the last rounds are one block of 1..`max_cycle_rounds` rounds repeated
  `repetitions` times or more — `git diff`, `git status`, `git log` with the same answers five
  turns running, or Read → Grep → Bash → Read → Grep → Bash → …;
- a **storm**: one tool called `storm_calls` times or more in a row with changing input, every
  call failing (an edit that never applies, a command that never works however it is spelled).
  Only failures count: many tools answer every success with the same acknowledgement
  (`TodoWrite`, `Write`), so an identical result alone says nothing.

Comparing results is what keeps legitimate work out: polling a build whose output changes,
re-reading a file after editing it, or reading file after file never forms a loop.

Only the trailing run of tool rounds counts. It ends, going backwards, at a user message without
tool results or with text of the person's beside them, before or after them (the person wrote
something new), or at an assistant message without tool calls (the model answered in text):
without that cut, a conversation that once looped would stay blocked for good, since clients
resend the whole history. So the way out of a block is a new message.

Pure: `detect_tool_loops` returns findings; the server logs them and, in `block` mode, answers
with `loop_refusal`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.types import Message, MessagesRequest, TextBlock, ToolResultBlock, ToolUseBlock
from q2api.conversion.report import Finding, FindingKind


class LoopMode(StrEnum):
    """`Q2API_LOOP_MODE`."""

    WARN = "warn"  # log the `tool loop suspected:` line, let the request through
    BLOCK = "block"  # log it, then refuse the request with a 400 that explains the loop
    OFF = "off"  # no loop detection at all


@dataclass(frozen=True, slots=True)
class LoopPolicy:
    mode: LoopMode = LoopMode.WARN
    # `Q2API_LOOP_THRESHOLD`: how many times a cycle of rounds must repeat to be a loop.
    repetitions: int = 3
    # `Q2API_LOOP_STORM_THRESHOLD`: failing calls of one tool in a row, with changing input.
    storm_calls: int = 8
    # The longest cycle looked for, in rounds. A longer one needs `repetitions` times as many
    # identical rounds before it could be reported; in practice stuck models cycle through a few.
    max_cycle_rounds: int = 5


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a round, with the result the client sent back for it (None: none came back)."""

    name: str
    input: dict[str, Any]
    result: ToolResultBlock | None
    message_index: int

    @property
    def is_error(self) -> bool:
        return self.result is not None and bool(self.result.is_error)

    def signature(self) -> tuple[str, bytes, bytes]:
        """Name, canonical input (sorted keys: key order never hides a repeat) and result digest."""
        return (self.name, _canonical(self.input), _result_digest(self.result))


Round = tuple[ToolCall, ...]
RoundKey = tuple[tuple[str, bytes, bytes], ...]

_canonical = msgspec.json.Encoder(order="sorted").encode
_LABEL_CHARS = 60
_REMINDER_OPEN, _REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"


def detect_tool_loops(request: MessagesRequest, policy: LoopPolicy = LoopPolicy()) -> tuple[Finding, ...]:
    """The loops at the end of the conversation (a cycle, a storm, or both); empty when none."""
    if policy.mode is LoopMode.OFF:
        return ()
    tail = _Tail(request.messages)
    findings = [finding for finding in (_cycle(tail, policy), _storm(tail, policy)) if finding is not None]
    return tuple(findings)


def loop_refusal(findings: Sequence[Finding], policy: LoopPolicy) -> AnthropicError | None:
    """The 400 that `block` mode answers for these findings (None in the other modes, or when there is no loop)."""
    loops = [
        finding for finding in findings if finding.kind in (FindingKind.TOOL_LOOP_CYCLE, FindingKind.TOOL_LOOP_STORM)
    ]
    if policy.mode is not LoopMode.BLOCK or not loops:
        return None
    loop = loops[0]
    why = (
        "The model keeps getting the same answers from its tools"
        if loop.kind is FindingKind.TOOL_LOOP_CYCLE
        else "The tool keeps failing whatever the model tries"
    )
    return AnthropicError(
        400,
        f"Tool loop detected: {loop.detail} (the last at messages.{loop.message_index}). "
        "q2api's loop guard (Q2API_LOOP_MODE=block) stopped this request so the loop does not go on. "
        f"{why}: send a new message that tells it what to do differently (that ends the loop for the guard), "
        "fix what the tool is waiting for, or start a new conversation. "
        "To let such requests through, set Q2API_LOOP_MODE=warn",
    )


# ------------------------------------------------------------------ rounds


def trailing_rounds(messages: Sequence[Message]) -> list[Round]:
    """The tool rounds at the end of the conversation, oldest first (see the module docstring)."""
    return list(reversed(list(_rounds_newest_first(messages))))


def _rounds_newest_first(messages: Sequence[Message]) -> Iterator[Round]:
    # Walking back: the results of the user messages after an assistant turn, by tool_use id, in
    # the order they were given; the turn's calls (it may span several messages), newest first.
    results: dict[str, list[ToolResultBlock]] = {}
    pending: list[tuple[ToolUseBlock, int]] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        blocks = message.content if isinstance(message.content, list) else ()
        if message.role == "system":
            continue  # context Claude Code interleaves; neither side acted
        if message.role == "user":
            if pending:
                yield _round(pending, results)
                pending, results = [], {}
            tool_results = [block for block in blocks if isinstance(block, ToolResultBlock)]
            if not tool_results or _has_new_text(message):
                return  # the person wrote something new: what came before no longer counts
            given: dict[str, list[ToolResultBlock]] = {}
            for block in tool_results:
                given.setdefault(block.tool_use_id, []).append(block)
            for tool_use_id, blocks_of_id in given.items():
                results[tool_use_id] = [*blocks_of_id, *results.get(tool_use_id, ())]
            continue
        uses = [block for block in blocks if isinstance(block, ToolUseBlock)]
        if not uses:
            break
        pending.extend((use, index) for use in reversed(uses))
    if pending:
        yield _round(pending, results)


def _round(pending: list[tuple[ToolUseBlock, int]], results: dict[str, list[ToolResultBlock]]) -> Round:
    """The calls (given newest first) in order, each with its result: a client that gives two calls
    one id answers them in order; a call left over gets that id's last result."""
    taken: dict[str, int] = {}
    calls = []
    for use, index in reversed(pending):
        given = results.get(use.id, ())
        position = taken.get(use.id, 0)
        taken[use.id] = position + 1
        result = given[min(position, len(given) - 1)] if given else None
        calls.append(ToolCall(use.name, use.input, result, index))
    return tuple(calls)


def _has_new_text(message: Message) -> bool:
    """Whether a user message holds text of the person's besides its tool results, wherever it sits
    (the Anthropic API allows text after `tool_result` blocks). The `<system-reminder>` blocks
    Claude Code adds are its own context, not the person writing."""
    for block in message.content if isinstance(message.content, list) else ():
        if isinstance(block, TextBlock):
            text = block.text.strip()
            if text and not (text.startswith(_REMINDER_OPEN) and text.endswith(_REMINDER_CLOSE)):
                return True
    return False


def _result_digest(block: ToolResultBlock | None) -> bytes:
    """A digest of the status and content (results can be megabytes); b"" when no result came back."""
    if block is None:
        return b""
    return hashlib.blake2b(_canonical([bool(block.is_error), block.content]), digest_size=16).digest()


class _Tail:
    """The trailing rounds counted from the newest (1), read from the messages and compared only as
    far back as a check needs: without a loop, that is a few rounds, however long the session."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self._source = _rounds_newest_first(messages)
        self._rounds: list[Round] = []
        self._keys: dict[int, RoundKey] = {}

    def has(self, position: int) -> bool:
        while len(self._rounds) < position:
            round_ = next(self._source, None)
            if round_ is None:
                return False
            self._rounds.append(round_)
        return True

    def round(self, position: int) -> Round:
        self.has(position)
        return self._rounds[position - 1]

    def key(self, position: int) -> RoundKey:
        key = self._keys.get(position)
        if key is None:
            # Parallel calls come back in any order; the round is the same set of calls.
            key = self._keys[position] = tuple(sorted(call.signature() for call in self.round(position)))
        return key

    def calls(self) -> Iterator[ToolCall]:
        """Every call, newest first."""
        position = 1
        while self.has(position):
            yield from reversed(self._rounds[position - 1])
            position += 1


# ------------------------------------------------------------------ cycles


def _cycle(tail: _Tail, policy: LoopPolicy) -> Finding | None:
    for period in range(1, policy.max_cycle_rounds + 1):
        span = period * policy.repetitions
        if not tail.has(span):
            break
        if not all(tail.key(i) == tail.key(i + period) for i in range(1, span - period + 1)):
            continue
        # How far back the repetition really goes (it may be longer than the threshold).
        periodic = span
        while tail.has(periodic + 1) and tail.key(periodic + 1) == tail.key(periodic + 1 - period):
            periodic += 1
        repeats = periodic // period
        cycle = [tail.round(position) for position in range(period, 0, -1)]  # oldest first
        if period == 1:
            what = f"the same tool round ({_round_label(cycle[0])}) {repeats} times in a row"
        else:
            steps = " → ".join(f"[{_round_label(round_)}]" for round_ in cycle)
            what = f"a cycle of {period} tool rounds ({steps}) {repeats} times in a row"
        return Finding(
            FindingKind.TOOL_LOOP_CYCLE,
            cycle[-1][-1].message_index,
            detail=f"{what}, with the same inputs and the same results each time",
        )
    return None


# ------------------------------------------------------------------ storms


def _storm(tail: _Tail, policy: LoopPolicy) -> Finding | None:
    run: list[ToolCall] = []  # newest first
    for call in tail.calls():
        if call.result is None:
            continue
        if run and call.name != run[0].name:
            break
        if not call.is_error:
            return None  # a storm is failures only; a success ends the question here
        run.append(call)
    if len(run) < policy.storm_calls:
        return None
    inputs = len({_canonical(call.input) for call in run})
    if inputs < 2:
        return None
    return Finding(
        FindingKind.TOOL_LOOP_STORM,
        run[0].message_index,
        detail=f"{run[0].name} called {len(run)} times in a row with {inputs} different inputs, and every call failed",
    )


# ------------------------------------------------------------------ labels


def _round_label(round_: Round) -> str:
    return ", ".join(_call_label(call) for call in round_)


def _call_label(call: ToolCall) -> str:
    """`Bash {"command":"git status"}`, the input cut short: enough to recognise the call."""
    shown = _canonical(call.input).decode()
    if len(shown) > _LABEL_CHARS:
        shown = shown[: _LABEL_CHARS - 1] + "…"
    return f"{call.name} {shown}"
