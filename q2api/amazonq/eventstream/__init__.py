"""AWS event-stream framing (`application/vnd.amazon.eventstream`): decoder and encoders.

Wire layout (docs/protocol.md#event-stream-framing), all integers big-endian::

    total_length u32 | headers_length u32 | prelude_crc u32 | headers | payload | message_crc u32

`EventStreamDecoder` is incremental: `feed()` raw body chunks, get whole `Frame`s back.
Both CRCs are checked, every header type is decoded, and each fault has its own exception
class (all subclasses of `EventStreamError`); a raw `KeyError`, `struct.error` or
`UnicodeDecodeError` never escapes.

There is deliberately no resynchronisation after a fault: the format has no sync marker, so
after a corrupt length the next frame boundary is unknowable, and scanning for a plausible
prelude could turn payload bytes into forged frames. Amazon Q streams arrive over TLS, so a
fault means a broken peer or proxy; the gateway aborts the stream. The decoder is therefore
poisoned: every later `feed()`/`close()` raises the same fault again. The first raise carries
`.frames`, the whole frames that preceded the fault in the failing chunk.

Decoded header value types: bool (types 0/1), int (byte, short, integer, long), bytes (byte
array), str (string), `datetime` in UTC (timestamp; the wire carries milliseconds since the
epoch, so the value always has whole milliseconds), `uuid.UUID` (uuid).
"""

from __future__ import annotations

from .decoder import EventStreamDecoder
from .encoder import (
    Int8,
    Int16,
    Int32,
    Int64,
    Timestamp,
    encode_error,
    encode_event,
    encode_exception,
    encode_frame,
    encode_headers,
)
from .errors import (
    ChecksumMismatch,
    EventStreamError,
    InvalidHeader,
    InvalidPrelude,
    MessageChecksumMismatch,
    PreludeChecksumMismatch,
    TruncatedStream,
)
from .frame import (
    MAX_HEADERS_LENGTH,
    MAX_PAYLOAD_LENGTH,
    MIN_FRAME_LENGTH,
    PRELUDE_LENGTH,
    Frame,
    HeaderValue,
)

__all__ = [
    "MAX_HEADERS_LENGTH",
    "MAX_PAYLOAD_LENGTH",
    "MIN_FRAME_LENGTH",
    "PRELUDE_LENGTH",
    "ChecksumMismatch",
    "EventStreamDecoder",
    "EventStreamError",
    "Frame",
    "HeaderValue",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "InvalidHeader",
    "InvalidPrelude",
    "MessageChecksumMismatch",
    "PreludeChecksumMismatch",
    "Timestamp",
    "TruncatedStream",
    "encode_error",
    "encode_event",
    "encode_exception",
    "encode_frame",
    "encode_headers",
]
