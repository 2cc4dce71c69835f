"""What happened on the way to one reply: every call to Amazon Q, with the host it went to.

The upstream client appends one :class:`UpstreamAttempt` per HTTP call it makes for a request —
retries, account switches and the repeat after a token refresh included — to the request's
:class:`UpstreamTrace`, so the request's log line can say how many calls a failure took and where
they went. Each attempt names its own host: an account's calls move down its list of hosts
(q2api.amazonq.host_choice) when one fails it.

The trace can also keep the exact body of the last call (`keep_body`), which a capture of a failed
request needs; the caller lets go of it as soon as it knows no capture will be written. Nothing
here holds a token: the body is the conversation, the Authorization header is never kept.
"""

from __future__ import annotations

import dataclasses
import time
from urllib.parse import urlsplit


@dataclasses.dataclass(frozen=True, slots=True)
class UpstreamAttempt:
    host: str  # the host the call went to (`q.us-east-1.amazonaws.com`)
    account: str  # the label of the account that made it
    outcome: str  # "ok", a FailureKind value, "timeout", "unreachable", … (q2api.amazonq.observer)
    status: int | None  # the HTTP status, when an answer came
    seconds: float  # from sending to the answer's headers (or the failure)


@dataclasses.dataclass(slots=True)
class UpstreamTrace:
    keep_body: bool = False
    attempts: list[UpstreamAttempt] = dataclasses.field(default_factory=list)
    sent_body: bytes | None = None  # the last body sent, when `keep_body`
    sent_to: str | None = None  # the URL it was sent to
    failure: BaseException | None = None  # why no reply could be opened, once that is final

    def record(self, attempt: UpstreamAttempt) -> None:
        self.attempts.append(attempt)

    def classify_last(self, outcome: str) -> None:
        """The last call's outcome, once its answer's body has said what it was."""
        if self.attempts:
            self.attempts[-1] = dataclasses.replace(self.attempts[-1], outcome=outcome)

    def sending(self, url: str, body: bytes) -> float:
        """A call is about to go out; returns its start time (for `record`)."""
        if self.keep_body:
            self.sent_body, self.sent_to = body, url
        return time.monotonic()

    def forget_body(self) -> None:
        self.sent_body = None

    @property
    def hosts(self) -> list[str]:
        return [attempt.host for attempt in self.attempts]


def host_of(url: str) -> str:
    """`https://q.us-east-1.amazonaws.com/` → `q.us-east-1.amazonaws.com` (with a port, when it has one)."""
    return urlsplit(url).netloc or url
