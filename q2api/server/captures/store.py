"""The capture directory: one JSON file per capture, private, bounded, oldest dropped first.

Files are created 0600 in a 0700 directory (a capture holds the user's conversation) under a
temporary name and renamed into place, so a reader never sees half a file. After each write the
oldest files go until at most `max_count` files and `max_bytes` bytes remain — the newest always
stays. Several `--workers` may write and prune at once: a file another process removed first is
simply gone.

A capture's id is its file name without `.json`: the UTC time it was written, to the
millisecond, and the request id (`20261123T191900767Z-req_b7deff17…`), so names sort by time.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from q2api.store.private_files import create_private_dir

MAX_CAPTURES = 100
MAX_CAPTURE_BYTES = 100 * 1024 * 1024
SUFFIX = ".json"
_ID = re.compile(r"^\d{8}T\d{9}Z-[A-Za-z0-9_-]{1,80}$")


@dataclass(frozen=True, slots=True)
class CaptureEntry:
    id: str
    path: Path
    size: int
    modified: float  # epoch seconds


def capture_id(request_id: str, at: datetime.datetime) -> str:
    """`20261123T191900767Z-req_…`: when, to the millisecond (UTC), and which request."""
    moment = at.astimezone(datetime.UTC)
    safe_request_id = re.sub(r"[^A-Za-z0-9_-]", "_", request_id)[:80] or "request"
    return f"{moment:%Y%m%dT%H%M%S}{moment.microsecond // 1000:03d}Z-{safe_request_id}"


class CaptureStore:
    def __init__(self, directory: Path, *, max_count: int = MAX_CAPTURES, max_bytes: int = MAX_CAPTURE_BYTES) -> None:
        self.directory = directory
        self._max_count = max_count
        self._max_bytes = max_bytes
        # Summaries already read, by id, with the size and time they were read at (the admin API
        # lists captures every few seconds; a capture file can be megabytes).
        self._summaries: dict[str, tuple[int, float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def write(self, capture_id: str, data: bytes) -> Path:
        """Write one capture (its id from `capture_id`), then drop the oldest over the bounds."""
        if not _ID.fullmatch(capture_id):
            raise ValueError(f"not a capture id: {capture_id!r}")
        create_private_dir(self.directory)
        path = self.directory / f"{capture_id}{SUFFIX}"
        temporary = self.directory / f".{capture_id}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            raise
        self.prune(keep=capture_id)
        return path

    def entries(self) -> list[CaptureEntry]:
        """Every capture, newest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            if path.suffix != SUFFIX or not _ID.fullmatch(path.stem):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # pruned by another worker meanwhile
            found.append(CaptureEntry(path.stem, path, stat.st_size, stat.st_mtime))
        found.sort(key=lambda entry: entry.id, reverse=True)
        return found

    def find(self, reference: str) -> CaptureEntry | None:
        """The capture named by its id, a unique start of its id, or its request id."""
        entries = self.entries()
        for entry in entries:
            if entry.id == reference:
                return entry
        matches = [entry for entry in entries if entry.id.startswith(reference) or entry.id.endswith(f"-{reference}")]
        return matches[0] if len(matches) == 1 else None

    def read(self, capture_id: str) -> bytes:
        if not _ID.fullmatch(capture_id):
            raise FileNotFoundError(capture_id)
        return (self.directory / f"{capture_id}{SUFFIX}").read_bytes()

    def summary(self, entry: CaptureEntry) -> dict[str, Any]:
        """The capture's `summary` (id, time, reasons, model, statuses…), read once per file version."""
        with self._lock:
            known = self._summaries.get(entry.id)
        if known is not None and known[:2] == (entry.size, entry.modified):
            return known[2]
        try:
            document = orjson.loads(entry.path.read_bytes())
            raw = document.get("summary") if isinstance(document, dict) else None
            summary = dict(raw) if isinstance(raw, dict) else {}  # a capture edited by hand: captures are input
        except (OSError, orjson.JSONDecodeError):
            summary = {"unreadable": True}
        summary.setdefault("id", entry.id)
        summary["size_bytes"] = entry.size
        with self._lock:
            self._summaries[entry.id] = (entry.size, entry.modified, summary)
        return summary

    def remove(self, capture_id: str) -> bool:
        if not _ID.fullmatch(capture_id):
            return False
        try:
            (self.directory / f"{capture_id}{SUFFIX}").unlink()
        except FileNotFoundError:
            return False
        with self._lock:
            self._summaries.pop(capture_id, None)
        return True

    def prune(self, keep: str | None = None) -> None:
        entries = self.entries()
        total = sum(entry.size for entry in entries)
        count = len(entries)
        for entry in reversed(entries):  # oldest first
            if count <= self._max_count and total <= self._max_bytes:
                break
            if entry.id == keep:
                continue
            if self.remove(entry.id):
                count -= 1
                total -= entry.size
        with self._lock:
            present = {entry.id for entry in entries}
            for stale in [known for known in self._summaries if known not in present]:
                del self._summaries[stale]
