"""One default TLS context for every HTTP client the tests make (tests/conftest.py installs it).

Each httpx client — the `anthropic` and `openai` SDKs' as much as the raw ones — loads the system's
CA bundle into a new SSLContext when it is made: 20 to 45 ms of CPU, two thirds of what starting and
stopping a gateway in this process costs altogether, in a suite that makes thousands of clients.
The tests reach only loopback, nearly always over plain HTTP, where the context is never used; the
TLS tests bring contexts of their own (the simulator's certificate). A context is not changed by a
client that holds it: ALPN is set on it per TLS connection, the same for every default client.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpcore2


def share_default_tls_context() -> None:
    if getattr(httpcore2.default_ssl_context, "shared", False):
        return
    make = httpcore2.default_ssl_context

    @functools.cache
    def shared(**options: Any) -> ssl.SSLContext:
        return make(**options)

    shared.shared = True  # type: ignore[attr-defined]
    httpcore2.default_ssl_context = shared
