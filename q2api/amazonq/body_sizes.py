"""What each host said about request sizes: the largest body it accepted, the smallest it refused.

Amazon Q's limit on a whole request is not published and the sources disagree (docs/protocol.md#limits:
1.3 MB refused as `Improperly formed request` in February 2026, bodies up to 6.34 MB accepted later, a
limit counted in tokens on the runtime host). So the gateway learns it per host: a size-shaped refusal
(`is_size_refusal`) of a body over 1 MB records the body's size, a 200 records it as accepted, and a body
at least as large as the smallest refused — and larger than every accepted one — is answered by the
gateway itself as a prompt too long, without a call.

Kept per host and model: where the limit is counted in tokens (KLB PR #26), a model with a larger
context window takes what another refused. Only refusals of bodies over 1 MB are learnt: below that a
size-shaped answer is a context window reached in tokens, which a byte figure would misjudge (a body of
images is large in bytes and small in tokens).

In memory, per process (each worker of `--workers N` learns on its own, at the cost of one refused call
per host and model; a restart forgets). Bounded: one entry per host and model, a few dozen per deployment.
"""

from __future__ import annotations

import dataclasses

from q2api.amazonq.errors import FailureKind, UpstreamHTTPError

# "Improperly formed request" names no cause; above this size it is taken as the size refusal JW #73 saw
# (1.0 and 1.25 MB accepted, 1.3 MB refused with exactly that text, docs/protocol.md#limits), below it as
# a body the host could not parse (docs/troubleshooting.md#improperly-formed-request).
IMPROPERLY_FORMED_SIZE_BYTES = 1_000_000
IMPROPERLY_FORMED_TEXT = "improperly formed request"
# KLB PR #26's runtime answer: {"message":"Input content length exceeds threshold.","reason":"CONTENT_LENGTH_EXCEEDS_THRESHOLD"}.
CONTENT_LENGTH_TEXT = "input content length exceeds threshold"


def is_size_refusal(error: UpstreamHTTPError, body_bytes: int) -> bool:
    """A 400 that says the body was too large: `CONTENT_LENGTH_EXCEEDS_THRESHOLD`, "Input is too long",
    "Input content length exceeds threshold", or "Improperly formed request" for a body over 1 MB."""
    if error.status != 400:
        return False
    message = error.message.lower()
    if error.kind is FailureKind.CONTEXT_OVERFLOW or CONTENT_LENGTH_TEXT in message:
        return True
    return IMPROPERLY_FORMED_TEXT in message and body_bytes > IMPROPERLY_FORMED_SIZE_BYTES


@dataclasses.dataclass(slots=True)
class _HostSizes:
    largest_accepted: int = 0
    smallest_refused: int | None = None


class BodySizes:
    """Per host name and model: the largest body accepted and the smallest refused as too large."""

    def __init__(self) -> None:
        self._hosts: dict[tuple[str, str | None], _HostSizes] = {}

    def accepted(self, host: str, model: str | None, size: int) -> None:
        sizes = self._hosts.setdefault((host, model), _HostSizes())
        sizes.largest_accepted = max(sizes.largest_accepted, size)

    def refused(self, host: str, model: str | None, size: int) -> None:
        """`host` refused a body of `size` bytes for `model` as too large (learnt only over 1 MB)."""
        if size <= IMPROPERLY_FORMED_SIZE_BYTES:
            return
        sizes = self._hosts.setdefault((host, model), _HostSizes())
        if sizes.smallest_refused is None or size < sizes.smallest_refused:
            sizes.smallest_refused = size

    def known_too_large(self, host: str, model: str | None, size: int) -> int | None:
        """The smallest size `host` refused for `model`, when a body of `size` bytes is sure to be refused too
        (at least that large and larger than anything it accepted: a limit in tokens lets some pass)."""
        sizes = self._hosts.get((host, model))
        if sizes is None or sizes.smallest_refused is None:
            return None
        if size >= sizes.smallest_refused and size > sizes.largest_accepted:
            return sizes.smallest_refused
        return None

    def figures(self, host: str, model: str | None) -> tuple[int, int | None]:
        """(largest accepted, smallest refused) for `host` and `model`: what the gateway knows of its limit."""
        sizes = self._hosts.get((host, model), _HostSizes())
        return sizes.largest_accepted, sizes.smallest_refused
