"""What the log says about each request's conversion (the records themselves are built, pure,
in `q2api.conversion`):

- `tool loop suspected: …` (WARNING) per loop the guard found, in every mode but `off`, written
  before a `block`-mode 400;
- `messages normalized:` (INFO) with `before`, `after` and one `kind=count` per kind of change,
  bound as fields so the JSON log carries them as data, whatever the debug flag says;
- `conversion finding: [warning] …` (WARNING) for everything dropped or replaced, with the reason;
- with `DEBUG_MESSAGE_CONVERSION`, the summary block of docs/troubleshooting.md#the-debug-summary (one multi-line message,
  which the text log writes as whole lines) and, at DEBUG, the redacted reproducers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson
from loguru import logger

from q2api.conversion import debug_summary
from q2api.conversion.normalization import LINE_PREFIX, normalization_record
from q2api.conversion.options import Conversion
from q2api.conversion.report import Finding, Severity
from q2api.server import metrics

LOOP_LINE_PREFIX = "tool loop suspected:"
FINDING_LINE_PREFIX = "conversion finding:"


def log_loop_findings(findings: Iterable[Finding], mode: str) -> None:
    for finding in findings:
        logger.warning(f"{LOOP_LINE_PREFIX} {finding.line()}")
        metrics.count_tool_loop(str(finding.kind), mode)


def log_conversion(
    claude_document: Callable[[], Any],
    claude_message_count: int,
    conversion: Conversion,
    guard_findings: tuple[Finding, ...],
    *,
    debug: bool,
) -> None:
    record = normalization_record(claude_message_count, conversion)
    if record is not None:
        logger.bind(**record.fields).info(LINE_PREFIX)
    metrics.count_conversion(
        record.changes if record else {},
        ((finding.kind, finding.severity) for finding in (*conversion.report, *guard_findings)),
    )
    for finding in conversion.report:
        if finding.severity is Severity.WARNING:
            logger.warning(f"{FINDING_LINE_PREFIX} {finding.line()}")
    if not debug:
        return
    logger.info(debug_summary.conversion_summary(claude_message_count, conversion, guard_findings))
    # Reproducers for bug reports, built only when a sink takes DEBUG lines (Q2API_LOG_LEVEL=DEBUG).
    logger.opt(lazy=True).debug(
        "Claude request (redacted): {}",
        lambda: _json_text(lambda: debug_summary.redacted_claude_request(claude_document())),
    )
    logger.opt(lazy=True).debug(
        "Amazon Q request (redacted): {}",
        lambda: _json_text(lambda: debug_summary.redacted_payload(conversion.payload)),
    )


def _json_text(make_document: Callable[[], Any]) -> str:
    """A debug dump; one the encoder cannot nest that deep (a client's metadata, say) is skipped, not fatal."""
    try:
        return orjson.dumps(make_document()).decode()
    except (TypeError, RecursionError, orjson.JSONDecodeError) as exc:
        return f"(not shown: {type(exc).__name__}: {exc})"
