"""How the `GenerateAssistantResponse` client calls Amazon Q: timeouts, retries, size and concurrency limits."""

from __future__ import annotations

import dataclasses

# The largest request body sources saw Amazon Q accept (docs/protocol.md#limits: bodies of 6.34 MB
# passed, 7.34 MB failed; an early 1.3 MB failure was not seen again once the limit moved to tokens).
DEFAULT_MAX_REQUEST_BYTES = 6_340_000


@dataclasses.dataclass(frozen=True)
class UpstreamConfig:
    # AMAZONQ_ENDPOINT: "" derives each account's hosts; one URL or a comma-separated list overrides them.
    endpoint: str = ""
    connect_timeout: float = 10.0
    first_byte_timeout: float = 120.0
    read_timeout: float = 300.0  # between two reads of the body
    max_retries: int = 3  # attempts after the first
    backoff_initial: float = 0.5
    backoff_max: float = 8.0  # also the longest Retry-After honoured by waiting instead of failing
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # a larger encoded body is never sent
    account_max_inflight: int = 8  # requests in flight per account (peers: Amazon Q tolerates 5–8)
    inflight_wait: float = 10.0  # how long a request waits for a free slot before "overloaded"
