"""One event-stream message and the wire constants shared by the decoder and the encoder."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HeaderValue = bool | int | bytes | str | uuid.UUID | datetime

PRELUDE_LENGTH = 12
MIN_FRAME_LENGTH = 16  # prelude + message CRC, no headers, no payload
# The same limits botocore enforces; they also bound what a corrupt prelude can make us buffer.
MAX_HEADERS_LENGTH = 128 * 1024
MAX_PAYLOAD_LENGTH = 24 * 1024 * 1024

PRELUDE = struct.Struct(">III")
UINT32 = struct.Struct(">I")
UINT16 = struct.Struct(">H")
# Header wire type code -> value layout, for the fixed-width types.
FIXED_WIDTH = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
    8: struct.Struct(">q"),  # timestamp: milliseconds since the epoch
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MILLISECOND = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class Frame:
    headers: dict[str, HeaderValue]
    payload: bytes

    @property
    def message_type(self) -> HeaderValue | None:
        return self.headers.get(":message-type")

    @property
    def event_type(self) -> HeaderValue | None:
        return self.headers.get(":event-type")

    @property
    def exception_type(self) -> HeaderValue | None:
        return self.headers.get(":exception-type")

    @property
    def content_type(self) -> HeaderValue | None:
        return self.headers.get(":content-type")

    @property
    def error_code(self) -> HeaderValue | None:
        """`:error-code` of a `:message-type: error` frame (unmodelled errors carry it in headers)."""
        return self.headers.get(":error-code")

    @property
    def error_message(self) -> HeaderValue | None:
        return self.headers.get(":error-message")
