"""The `messages normalized:` record: how the conversion changed the shape of the conversation.

Seed 001's `messages_normalized` event, for every request whose conversation the converter
changed, whatever the debug flag says: how many Claude messages came in (`before`), how many
Amazon Q messages go out (`after`: history + the current message), and how many changes of each
kind made the difference. Changes to the tool list or the model are not conversation shape and
have findings of their own.

Pure: the server writes the record as an INFO line with these fields bound (text and JSON logs).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from q2api.conversion.options import Conversion
from q2api.conversion.report import FindingKind

LINE_PREFIX = "messages normalized:"

CONVERSATION_CHANGES = frozenset(
    {
        FindingKind.MERGED_USER_TURN,
        FindingKind.MERGED_ASSISTANT_TURN,
        FindingKind.SYSTEM_PROMPT_AS_CONTEXT,
        FindingKind.SYSTEM_TURN_AS_CONTEXT,
        FindingKind.EMPTY_SYSTEM_TURN_DROPPED,
        FindingKind.LEADING_ASSISTANT_TURN,
        FindingKind.PREFILL,
        FindingKind.HISTORY_TRIMMED,
        FindingKind.EMPTY_CONTENT_PLACEHOLDER,
        FindingKind.DUPLICATE_TOOL_RESULT_MERGED,
        FindingKind.TOOL_RESULTS_REORDERED,
        FindingKind.ORPHAN_TOOL_RESULT,
        FindingKind.CANCELLED_TOOL_RESULT,
        FindingKind.EMPTY_TOOL_RESULT,
        FindingKind.DUPLICATE_TOOL_USE_ID,
        FindingKind.TOOL_USE_ID_RENAMED,
        FindingKind.TOOL_INPUT_REPAIRED,
        FindingKind.IMAGE_DROPPED,
        FindingKind.IMAGE_DATA_URL_STRIPPED,
        FindingKind.DOCUMENT_AS_TEXT,
        FindingKind.PDF_TEXT_EXTRACTED,
        FindingKind.THINKING_AS_TEXT,
        FindingKind.REDACTED_THINKING_DROPPED,
        FindingKind.SERVER_BLOCK_DROPPED,
    }
)


@dataclass(frozen=True, slots=True)
class NormalizationRecord:
    before: int  # Claude messages received
    after: int  # Amazon Q messages sent: history + the current message
    changes: dict[str, int]  # finding kind -> count, in the order first seen

    @property
    def fields(self) -> dict[str, int]:
        """`before`, `after` and one entry per kind of change: the structured form of the line."""
        return {"before": self.before, "after": self.after, **self.changes}

    def line(self) -> str:
        """`messages normalized: before=7 after=6 merged_user_turn=1` (as the text log shows it)."""
        return " ".join([LINE_PREFIX, *(f"{key}={value}" for key, value in self.fields.items())])


def normalization_record(claude_message_count: int, conversion: Conversion) -> NormalizationRecord | None:
    """The record for this conversion; None when the conversation went through unchanged."""
    changes = Counter(str(finding.kind) for finding in conversion.report if finding.kind in CONVERSATION_CHANGES)
    if not changes:
        return None
    return NormalizationRecord(claude_message_count, len(conversion.history) + 1, dict(changes))
