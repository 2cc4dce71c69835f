"""One exception class per way an event stream can be broken.

EventStreamError (ValueError)      the stream must be aborted; `.frames` = whole frames before the fault
├── InvalidPrelude                 impossible lengths, or over the limits
├── ChecksumMismatch               (expected, calculated, offset)
│   ├── PreludeChecksumMismatch
│   └── MessageChecksumMismatch
├── InvalidHeader                  unknown type code, truncated, bad UTF-8, duplicate name
└── TruncatedStream                the body ended inside a frame
"""

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
    """A CRC-32 does not match: the bytes were damaged on the way."""

    part = "frame"

    def __init__(self, expected: int, calculated: int, offset: int) -> None:
        self.expected = expected  # what the frame says
        self.calculated = calculated  # what its bytes give
        self.offset = offset  # of the frame in the stream
        super().__init__(
            f"{self.part} CRC mismatch in the frame at offset {offset}: "
            f"computed {calculated:#010x}, frame says {expected:#010x}"
        )


class PreludeChecksumMismatch(ChecksumMismatch):
    part = "prelude"


class MessageChecksumMismatch(ChecksumMismatch):
    part = "message"


class InvalidHeader(EventStreamError):
    """Unknown type code, truncated header, bad UTF-8, duplicate name, or unrepresentable value."""


class TruncatedStream(EventStreamError):
    """The stream ended in the middle of a frame."""
