"""One exception class per way an event stream can be broken."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .frame import Frame


class EventStreamError(ValueError):
    """The byte stream is not a valid AWS event stream. The stream must be aborted."""

    def __init__(self, message: str, frames: tuple[Frame, ...] = ()) -> None:
        super().__init__(message)
        # Whole frames decoded by the failing feed() call before the fault, so a caller may
        # still deliver them before aborting. Empty when a poisoned decoder re-raises.
        self.frames = frames


class InvalidPrelude(EventStreamError):
    """The prelude's lengths are impossible or exceed the limits."""


class ChecksumMismatch(EventStreamError):
    pass


class PreludeChecksumMismatch(ChecksumMismatch):
    pass


class MessageChecksumMismatch(ChecksumMismatch):
    pass


class InvalidHeader(EventStreamError):
    """Unknown type code, truncated header, bad UTF-8, duplicate name, or unrepresentable value."""


class TruncatedStream(EventStreamError):
    """The stream ended in the middle of a frame."""
