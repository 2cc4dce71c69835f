"""The upstream calls of a reply that compacts its conversation (q2api.frontdoors.claude.compaction), converted.

The door says a compaction is due and what the summarising call asks; the calls themselves are
Amazon Q requests, converted here the way the request's own was (same model and conversation).
"""

from __future__ import annotations

from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import MessagesRequest
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.frontdoors.claude.compaction import CompactionAsk, continued_request, summary_of, summary_request
from q2api.server.lifecycle.reply import CompactionPlan


def compaction_plan(
    request: MessagesRequest, ask: CompactionAsk | None, options: ConversionOptions
) -> CompactionPlan | None:
    if ask is None:
        return None
    summarising = summary_request(request, ask)

    def continued(summary: str) -> tuple[GenerateAssistantResponseRequest, int]:
        going_on = continued_request(request, summary)
        return convert_claude_request(going_on, options).payload, estimate_request_tokens(going_on)

    return CompactionPlan(
        summary_payload=convert_claude_request(summarising, options).payload,
        summary_estimate=estimate_request_tokens(summarising),
        pause=ask.pause,
        continued=continued,
        summary_of=summary_of,
    )
