"""Just enough of HTTP/1.1 to read a streamed reply: the status line, the framing headers, a chunked body.

The lean client needs to know three things of a reply — its status, where its
body's bytes are, and where it ends — and nothing else, so this is a parser of
those and not of HTTP: no header is kept but the framing ones.
"""

from __future__ import annotations

HEAD_END = b"\r\n\r\n"


class MalformedReply(ValueError):
    """The bytes are not an HTTP/1.1 reply this reader understands."""


def parse_head(head: bytes) -> tuple[int, bool, int | None]:
    """(status, chunked, content length) from the bytes before the blank line."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise MalformedReply(f"not a status line: {lines[0][:80]!r}")
    chunked = False
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"content-length":
            length = int(value.strip())
    return int(parts[1]), chunked, length


class BodyReader:
    """The body of one reply, fed read by read: returns the payload bytes of each read, knows when it is over."""

    def __init__(self, chunked: bool, length: int | None) -> None:
        self._chunked = chunked
        self._left = length  # body bytes still to come when the length is known (None: until the server closes)
        self._pending = b""  # a chunk-size line not yet whole
        self._in_chunk = 0  # data bytes left in the current chunk
        self._crlf = 0  # bytes of the CRLF that ends the current chunk still to skip
        self.complete = length == 0

    def feed(self, data: bytes) -> bytes:
        if self._chunked:
            return self._feed_chunked(data)
        if self._left is None:
            return data
        data = data[: self._left]
        self._left -= len(data)
        self.complete = self._left == 0
        return data

    def _feed_chunked(self, data: bytes) -> bytes:
        if self._pending:
            data = self._pending + data
            self._pending = b""
        payload: list[bytes] = []
        position = 0
        end = len(data)
        while position < end and not self.complete:
            if self._in_chunk:
                taken = data[position : position + self._in_chunk]
                payload.append(taken)
                position += len(taken)
                self._in_chunk -= len(taken)
                if not self._in_chunk:
                    self._crlf = 2
            elif self._crlf:
                skipped = min(self._crlf, end - position)
                position += skipped
                self._crlf -= skipped
            else:
                line_end = data.find(b"\r\n", position)
                if line_end < 0:
                    self._pending = data[position:]
                    break
                size_text = data[position:line_end].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise MalformedReply(f"not a chunk size: {size_text[:40]!r}") from None
                position = line_end + 2
                if size == 0:
                    # The last chunk. Trailers, if any, are not read: the server closes the connection.
                    self.complete = True
                else:
                    self._in_chunk = size
        return b"".join(payload) if len(payload) != 1 else payload[0]
