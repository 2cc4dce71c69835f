"""The request stage in one call: loop guard, conversion, trimming, order guard. Pure.

The relay runs it on every request (with a checkpoint to resume from); a capture with redacted
text and `q2api replay --convert-only` run it again on a captured request, so what they report is
what the gateway would do.
"""

from __future__ import annotations

from dataclasses import dataclass

from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.anthropic.types import MessagesRequest
from q2api.conversion.checkpoints import Checkpoint
from q2api.conversion.claude_converter import Conversion, ConversionOptions, convert_claude_request
from q2api.conversion.loop_guard import LoopPolicy, detect_tool_loops, loop_refusal
from q2api.conversion.order_guard import validate_conversation
from q2api.conversion.report import Finding
from q2api.conversion.trimming import TrimPolicy, trim_history


@dataclass(frozen=True, slots=True)
class GuardedConversion:
    loop_findings: tuple[Finding, ...]
    # Block mode found a loop (nothing was converted), or the conversion is invalid (`converter_refusal`).
    refusal: AnthropicError | None
    conversion: Conversion | None
    invalid: tuple[Finding, ...]  # the order guard's findings on the output: converter bugs
    trimmed: bool  # history trimming left rounds out of the body

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Everything reported: the conversion's report, then the guards' findings."""
        report = self.conversion.report if self.conversion is not None else ()
        return (*report, *self.loop_findings, *self.invalid)


def convert_guarded(
    request: MessagesRequest,
    options: ConversionOptions,
    loop_policy: LoopPolicy,
    trim_policy: TrimPolicy,
    resume: Checkpoint | None = None,
) -> GuardedConversion:
    loop_findings = detect_tool_loops(request, loop_policy)
    refusal = loop_refusal(loop_findings, loop_policy)
    if refusal is not None:
        return GuardedConversion(loop_findings, refusal, None, (), trimmed=False)
    converted = convert_claude_request(request, options, resume)
    conversion = trim_history(converted, trim_policy)
    trimmed = conversion is not converted
    # The history entries the guard found valid on the previous turn, unless trimming moved them.
    checked = resume.checked if resume is not None and not trimmed else None
    invalid = validate_conversation(conversion.payload, checked)
    return GuardedConversion(loop_findings, converter_refusal(invalid), conversion, invalid, trimmed)


def converter_refusal(invalid: tuple[Finding, ...]) -> AnthropicError | None:
    """The 400 for a conversion the order guard finds invalid, or None when it is valid.

    The converter repairs what it knows (long descriptions move to the context, names are
    shortened, tool pairs are restored); an output its own guard still finds invalid is a case it
    does not know. Sent anyway, it met Amazon Q's opaque `Improperly formed request` — after the
    request was logged as an ERROR — so it is refused here instead, naming the Amazon Q field and
    the rule, before any upstream call."""
    if not invalid:
        return None
    return InvalidRequest(
        "",
        f"the request cannot be converted into a valid Amazon Q request ({invalid[0].detail}); "
        "it was not sent upstream",
    )
