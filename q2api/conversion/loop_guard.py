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
tool results (the person wrote something new) or at an assistant message without tool calls (the
model answered in text): without that cut, a conversation that once looped would stay blocked for
good, since clients resend the whole history. So the way out of a block is a new message.

Pure: `detect_tool_loops` returns findings; the server logs them and, in `block` mode, answers
with `loop_refusal`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import msgspec

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.types import Message, MessagesRequest, ToolResultBlock, ToolUseBlock
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
    name: str
    input: bytes  # canonical JSON (sorted keys), so key order never hides a repeat
    result: bytes | None  # digest of the result (status + content); None when none came back
    is_error: bool
    message_index: int

    @property
    def signature(self) -> tuple[str, bytes, bytes]:
        return (self.name, self.input, self.result or b"")  # a digest is never empty: b"" = no result


Round = tuple[ToolCall, ...]

_canonical = msgspec.json.Encoder(order="sorted").encode
_LABEL_CHARS = 60


def detect_tool_loops(request: MessagesRequest, policy: LoopPolicy = LoopPolicy()) -> tuple[Finding, ...]:
    """The loops at the end of the conversation (a cycle, a storm, or both); empty when none."""
    if policy.mode is LoopMode.OFF:
        return ()
    rounds = trailing_rounds(request.messages)
    findings = [finding for finding in (_cycle(rounds, policy), _storm(rounds, policy)) if finding is not None]
    return tuple(findings)


def loop_refusal(findings: Sequence[Finding], policy: LoopPolicy) -> AnthropicError | None:
    """The 400 that `block` mode answers for these findings (None in the other modes, or when there is no loop)."""
    loops = [
        finding for finding in findings if finding.kind in (FindingKind.TOOL_LOOP_CYCLE, FindingKind.TOOL_LOOP_STORM)
    ]
    if policy.mode is not LoopMode.BLOCK or not loops:
        return None
    loop = loops[0]
    return AnthropicError(
        400,
        f"Tool loop detected: {loop.detail} (the last at messages.{loop.message_index}). q2api's loop guard (Q2API_LOOP_MODE=block) stopped this request "
        "so the loop does not go on. The model keeps getting the same answer from its tools: send a new "
        "message that tells it what to do differently (that ends the loop for the guard), fix what the tool "
        "is waiting for, or start a new conversation. To let such requests through, set Q2API_LOOP_MODE=warn",
    )


# ------------------------------------------------------------------ rounds


def trailing_rounds(messages: Sequence[Message]) -> list[Round]:
    """The tool rounds at the end of the conversation, oldest first (see the module docstring)."""
    results: dict[str, tuple[bytes, bool]] = {}
    rounds: list[Round] = []
    pending: list[ToolCall] = []  # the current assistant turn, which may span several messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        blocks = message.content if isinstance(message.content, list) else ()
        if message.role == "system":
            continue  # context Claude Code interleaves; neither side acted
        if message.role == "user":
            if pending:
                rounds.append(tuple(reversed(pending)))
                pending = []
            tool_results = [block for block in blocks if isinstance(block, ToolResultBlock)]
            if not tool_results:
                break
            for block in tool_results:
                results.setdefault(block.tool_use_id, (_result_digest(block), bool(block.is_error)))
            continue
        uses = [block for block in blocks if isinstance(block, ToolUseBlock)]
        if not uses:
            break
        for use in reversed(uses):
            result, is_error = results.get(use.id, (None, False))
            pending.append(ToolCall(use.name, _canonical(use.input), result, is_error, index))
    if pending:
        rounds.append(tuple(reversed(pending)))
    rounds.reverse()
    return rounds


def _result_digest(block: ToolResultBlock) -> bytes:
    # A digest, not the content: results can be megabytes (file contents, images).
    encoded = _canonical([bool(block.is_error), block.content])
    return hashlib.blake2b(encoded, digest_size=16).digest()


def _round_key(round_: Round) -> tuple[tuple[str, bytes, bytes], ...]:
    # Parallel calls come back in any order; the round is the same set of calls.
    return tuple(sorted(call.signature for call in round_))


# ------------------------------------------------------------------ cycles


def _cycle(rounds: list[Round], policy: LoopPolicy) -> Finding | None:
    keys = [_round_key(round_) for round_ in rounds]
    for period in range(1, policy.max_cycle_rounds + 1):
        span = period * policy.repetitions
        if span > len(keys):
            break
        if not all(keys[-i] == keys[-i - period] for i in range(1, span - period + 1)):
            continue
        # How far back the repetition really goes (it may be longer than the threshold).
        periodic = span
        while periodic < len(keys) and keys[-periodic - 1] == keys[-periodic - 1 + period]:
            periodic += 1
        repeats = periodic // period
        cycle = rounds[-period:]
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


def _storm(rounds: list[Round], policy: LoopPolicy) -> Finding | None:
    calls = [call for round_ in rounds for call in round_ if call.result is not None]
    if not calls:
        return None
    name = calls[-1].name
    run: list[ToolCall] = []
    for call in reversed(calls):
        if call.name != name:
            break
        run.append(call)
    inputs = len({call.input for call in run})
    if len(run) < policy.storm_calls or inputs < 2 or not all(call.is_error for call in run):
        return None
    return Finding(
        FindingKind.TOOL_LOOP_STORM,
        run[0].message_index,
        detail=f"{name} called {len(run)} times in a row with {inputs} different inputs, and every call failed",
    )


# ------------------------------------------------------------------ labels


def _round_label(round_: Round) -> str:
    return ", ".join(_call_label(call) for call in round_)


def _call_label(call: ToolCall) -> str:
    """`Bash {"command":"git status"}`, the input cut short: enough to recognise the call."""
    shown = call.input.decode("utf-8", "replace")
    if len(shown) > _LABEL_CHARS:
        shown = shown[: _LABEL_CHARS - 1] + "…"
    return f"{call.name} {shown}"
