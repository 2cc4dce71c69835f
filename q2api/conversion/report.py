"""The structured report of a conversion: one record per merge, repair, drop or placeholder.

The converter and the guards never fix anything silently. Every change they make to what the
client sent becomes a :class:`Finding`, which feeds the `DEBUG_MESSAGE_CONVERSION` summary
(`q2api.conversion.debug_summary`) and the logs, so a user can see exactly what reached Amazon Q and why.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from q2api.log_text import one_line


class Severity(StrEnum):
    INFO = "info"  # an expected adaptation (merges, renames, placeholders)
    WARNING = "warning"  # something the client sent could not travel as-is (drops, loops)
    ERROR = "error"  # the converted request breaks an Amazon Q rule: a converter bug


class FindingKind(StrEnum):
    # turns
    MERGED_USER_TURN = "merged_user_turn"
    MERGED_ASSISTANT_TURN = "merged_assistant_turn"
    SYSTEM_PROMPT_AS_CONTEXT = "system_prompt_as_context"
    SYSTEM_TURN_AS_CONTEXT = "system_turn_as_context"
    EMPTY_SYSTEM_TURN_DROPPED = "empty_system_turn_dropped"
    LEADING_ASSISTANT_TURN = "leading_assistant_turn"
    PREFILL = "prefill"
    HISTORY_TRIMMED = "history_trimmed"
    EMPTY_CONTENT_PLACEHOLDER = "empty_content_placeholder"
    # tool results
    DUPLICATE_TOOL_RESULT_MERGED = "duplicate_tool_result_merged"
    TOOL_RESULTS_REORDERED = "tool_results_reordered"
    ORPHAN_TOOL_RESULT = "orphan_tool_result"
    CANCELLED_TOOL_RESULT = "cancelled_tool_result"
    EMPTY_TOOL_RESULT = "empty_tool_result"
    # tool uses
    DUPLICATE_TOOL_USE_ID = "duplicate_tool_use_id"
    TOOL_USE_ID_RENAMED = "tool_use_id_renamed"
    TOOL_INPUT_REPAIRED = "tool_input_repaired"
    # tool specs
    TOOL_RENAMED = "tool_renamed"
    TOOL_DESCRIPTION_PLACEHOLDER = "tool_description_placeholder"
    TOOL_DESCRIPTION_TRUNCATED = "tool_description_truncated"
    TOOL_SCHEMA_CLEANED = "tool_schema_cleaned"
    TOOL_SCHEMA_OBJECT_ROOT = "tool_schema_object_root"
    HISTORY_TOOL_PLACEHOLDER = "history_tool_placeholder"
    SERVER_TOOL_DROPPED = "server_tool_dropped"
    DUPLICATE_TOOL_DROPPED = "duplicate_tool_dropped"
    TOOL_NAME_CASE_MERGED = "tool_name_case_merged"
    TOOL_CHOICE_NONE = "tool_choice_none"
    TOOL_CHOICE_IGNORED = "tool_choice_ignored"
    # content
    IMAGE_DROPPED = "image_dropped"
    IMAGE_DATA_URL_STRIPPED = "image_data_url_stripped"
    DOCUMENT_AS_TEXT = "document_as_text"
    PDF_TEXT_EXTRACTED = "pdf_text_extracted"
    THINKING_AS_TEXT = "thinking_as_text"
    REDACTED_THINKING_DROPPED = "redacted_thinking_dropped"
    SERVER_BLOCK_DROPPED = "server_block_dropped"
    SERVER_BLOCK_AS_TEXT = "server_block_as_text"  # an earlier web search, as context text
    THINKING_HINT = "thinking_hint"
    NATIVE_THINKING = "native_thinking"  # the thinking request went as additionalModelRequestFields
    REASONING_REPLAYED = "reasoning_replayed"  # a signed thinking block went back as reasoningContent
    # model
    UNKNOWN_MODEL = "unknown_model"
    # guards: order validation of the output (each one is a converter bug)
    INVALID_ORDER = "invalid_order"
    UNANSWERED_TOOL_USE = "unanswered_tool_use"
    UNMATCHED_TOOL_RESULT = "unmatched_tool_result"
    MISSING_TOOL_SPEC = "missing_tool_spec"
    FIELD_LIMIT = "field_limit"
    NULL_VALUE = "null_value"
    # guards: loop detection on the input
    TOOL_LOOP_CYCLE = "tool_loop_cycle"
    TOOL_LOOP_STORM = "tool_loop_storm"


_WARNINGS = frozenset(
    {
        FindingKind.ORPHAN_TOOL_RESULT,
        FindingKind.CANCELLED_TOOL_RESULT,
        FindingKind.SERVER_TOOL_DROPPED,
        FindingKind.DUPLICATE_TOOL_DROPPED,
        FindingKind.TOOL_CHOICE_IGNORED,
        FindingKind.IMAGE_DROPPED,
        FindingKind.IMAGE_DATA_URL_STRIPPED,
        FindingKind.HISTORY_TRIMMED,
        FindingKind.PDF_TEXT_EXTRACTED,
        FindingKind.REDACTED_THINKING_DROPPED,
        FindingKind.SERVER_BLOCK_DROPPED,
        # Not UNKNOWN_MODEL: the model router's "model substituted" line is that event's warning.
        FindingKind.TOOL_LOOP_CYCLE,
        FindingKind.TOOL_LOOP_STORM,
    }
)
_ERRORS = frozenset(
    {
        FindingKind.INVALID_ORDER,
        FindingKind.UNANSWERED_TOOL_USE,
        FindingKind.UNMATCHED_TOOL_RESULT,
        FindingKind.MISSING_TOOL_SPEC,
        FindingKind.FIELD_LIMIT,
        FindingKind.NULL_VALUE,
    }
)


class Finding(NamedTuple):
    """One change or problem. `message_index` points into the client's `messages`
    (None when the finding is about the request as a whole, or about the output).
    A NamedTuple: immutable, and cheap to create (a long session yields dozens per request)."""

    kind: FindingKind
    message_index: int | None = None
    tool_use_id: str | None = None
    detail: str = ""

    @property
    def severity(self) -> Severity:
        if self.kind in _ERRORS:
            return Severity.ERROR
        if self.kind in _WARNINGS:
            return Severity.WARNING
        return Severity.INFO

    def line(self) -> str:
        """One human-readable log line, e.g. `[warning] orphan_tool_result message=4 tool=toolu_1: …`."""
        parts = [f"[{self.severity}] {self.kind}"]
        if self.message_index is not None:
            parts.append(f" message={self.message_index}")
        if self.tool_use_id is not None:
            parts.append(f" tool={one_line(self.tool_use_id)}")
        if self.detail:
            # Tool ids and names come from the client: escaped, the line stays one line.
            parts.append(f": {one_line(self.detail)}")
        return "".join(parts)
