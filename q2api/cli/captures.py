"""`q2api captures list | show | rm`: the capture files of failed requests (Q2API_CAPTURE).

A capture is named by its id (`20261123T191900767Z-req_…`, as the request's log line says), a
unique start of it, its request id, or a path to the file. Every command first names the
directory it reads (on stderr, so stdout stays scriptable).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from q2api.cli.terminal import echo
from q2api.server.captures.shape import NotACapture, check_capture
from q2api.server.captures.store import CaptureStore
from q2api.settings import SettingsError, load_settings

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
LIST_COLUMNS = ("ID", "REASONS", "STATUS", "UPSTREAM", "MODEL", "FINDINGS", "SIZE")


def run_captures_command(args: argparse.Namespace) -> int:
    store = configured_store()
    if store is None:
        return EXIT_USAGE
    command = args.captures_command
    if command == "list":
        return _list(store, as_json=args.json)
    if command == "show":
        return _show(store, args.capture, as_json=args.json)
    return _remove(store, args.captures, remove_all=args.all)


def configured_store() -> CaptureStore | None:
    """The store of `Q2API_CAPTURE_DIR` (else the data directory's), announced on stderr."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"q2api: {exc}", file=sys.stderr)
        return None
    store = CaptureStore(settings.capture_dir)
    print(f"captures: {store.directory.resolve()}", file=sys.stderr)
    return store


def read_capture(store: CaptureStore | None, reference: str) -> tuple[Path, dict[str, Any]] | None:
    """The capture a reference names (a path, an id, a start of one, a request id), parsed; None: not found."""
    path = Path(reference)
    if not path.is_file():
        entry = store.find(reference) if store is not None else None
        if entry is None:
            return None
        path = entry.path
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return (path, document) if isinstance(document, dict) else None


def _list(store: CaptureStore, *, as_json: bool) -> int:
    summaries = [store.summary(entry) for entry in store.entries()]
    if as_json:
        print(orjson.dumps(summaries, option=orjson.OPT_INDENT_2).decode())
        return EXIT_OK
    if not summaries:
        print("No captures yet. A failed request gets one (Q2API_CAPTURE=failures, the default).")
        return EXIT_OK
    rows = [LIST_COLUMNS] + [
        (
            str(summary.get("id")),
            ",".join(map(str, _listed(summary.get("reasons")))) or "-",
            str(summary.get("status", "-")),
            str(summary.get("upstream_status") or "-"),
            str(summary.get("upstream_model") or summary.get("model") or "-"),
            str(summary.get("findings", "-")),
            _size(int(summary.get("size_bytes") or 0)),
        )
        for summary in summaries
    ]
    echo(_aligned(rows))
    return EXIT_OK


def _show(store: CaptureStore, reference: str, *, as_json: bool) -> int:
    found = read_capture(store, reference)
    if found is None:
        print(f"q2api captures show: no capture {reference!r} (see `q2api captures list`)", file=sys.stderr)
        return EXIT_NOT_FOUND
    path, document = found
    try:
        check_capture(document)
    except NotACapture as exc:
        echo(f"q2api captures show: {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if as_json:
        # Every character outside ASCII escaped: a C1 control (ESC's twin) is valid raw in JSON.
        print(json.dumps(document, indent=2, ensure_ascii=True))
        return EXIT_OK
    echo(describe(path, document))
    return EXIT_OK


def describe(path: Path, document: dict[str, Any]) -> str:
    """A capture as a person reads it: what failed, what the conversion and Amazon Q said."""
    summary = document.get("summary") or {}
    client = document.get("client_response") or {}
    conversion = document.get("conversion") or {}
    lines = [
        f"capture    {summary.get('id')}  ({path})",
        f"request    {summary.get('request_id')}  {summary.get('route')}  at {summary.get('captured_at')}",
        f"reasons    {', '.join(map(str, _listed(summary.get('reasons')))) or '-'}",
        f"model      {summary.get('model')} → {summary.get('upstream_model')}",
        f"client got {client.get('status')} {client.get('error_type') or ''}".rstrip(),
    ]
    if client.get("message"):
        lines.append(f"           {client['message']}")
    upstream = document.get("upstream_response")
    if upstream:
        lines.append(
            f"Amazon Q   {upstream.get('status')} {upstream.get('code') or ''} {upstream.get('reason') or ''}".rstrip()
        )
        lines.append(f"           {upstream.get('message')}  (request id {upstream.get('request_id') or '-'})")
    for attempt in document.get("upstream_attempts") or ():
        lines.append(
            f"attempt    {attempt.get('host')}  account {attempt.get('account')}  {attempt.get('outcome')}"
            f"  status {attempt.get('status') or '-'}  {attempt.get('ms')} ms"
        )
    timings = document.get("timings") or {}
    if timings:
        lines.append(
            "timings    "
            + "  ".join(f"{name}={value if value is not None else '-'}" for name, value in timings.items())
        )
    if summary.get("text_redacted"):
        lines.append("text       redacted (Q2API_CAPTURE_REDACT_TEXT): the texts below are same-shape filler")
    placeholders = document.get("placeholders") or []
    if placeholders:
        lines.append(f"left out   {len(placeholders)} image(s)/document(s), replaced by size-keeping placeholders")
    if conversion.get("debug_summary"):
        lines.append("")
        lines.append(conversion["debug_summary"])
    elif conversion.get("findings"):
        lines.append("")
        lines.extend(_finding_line(finding) for finding in conversion["findings"])
    if conversion.get("refused"):
        lines.append(f"refused    {conversion['refused']}")
    lines.append("")
    lines.append(
        f"Re-run it: q2api replay {summary.get('id')} --convert-only --diff   (or without --convert-only to send it)"
    )
    return "\n".join(lines)


def _finding_line(finding: dict[str, Any]) -> str:
    parts = [f"[{finding.get('severity')}] {finding.get('kind')}"]
    if finding.get("message_index") is not None:
        parts.append(f" message={finding['message_index']}")
    if finding.get("tool_use_id") is not None:
        parts.append(f" tool={finding['tool_use_id']}")
    if finding.get("detail"):
        parts.append(f": {finding['detail']}")
    return "".join(parts)


def _remove(store: CaptureStore, references: Sequence[str], *, remove_all: bool) -> int:
    if remove_all:
        entries = store.entries()
        for entry in entries:
            store.remove(entry.id)
        print(f"removed {len(entries)} capture(s)")
        return EXIT_OK
    if not references:
        print("q2api captures rm: name one or more captures, or --all", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK
    for reference in references:
        found = store.find(reference)
        if found is None or not store.remove(found.id):
            print(f"q2api captures rm: no capture {reference!r}", file=sys.stderr)
            status = EXIT_NOT_FOUND
            continue
        print(f"removed {found.id}")
    return status


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _size(size: int) -> str:
    return f"{size / 1024:.1f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def _aligned(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
