"""What keeps a web page the user happens to visit from using the gateway through the user's browser.

A page may send requests to http://localhost:8000 from any site; two ways would let it use the
gateway (and its Amazon Q accounts), and each has its check:

* a cross-site POST the browser sends without asking first (no CORS preflight) carries a
  `text/plain`, form or multipart body. So the JSON endpoints take only
  `Content-Type: application/json` (`require_json`, 415 otherwise), which a page can send to
  another origin only after a preflight, and this gateway answers no preflight;
* DNS rebinding: a page on `attacker.example` points its own name at 127.0.0.1 and then reads
  the gateway's answers as its own. Its requests still say `Host: attacker.example`, so a gateway
  without client keys answers only loopback names and the names in Q2API_ALLOWED_HOSTS
  (`HostAllowList`, 403 otherwise). With client keys the key does that job: a page cannot know it.

A WebSocket is the exception to the first: a page may open one to any origin without asking, and
the browser says which page did in `Origin`. A gateway without client keys refuses a handshake
that carries one (`refuse_browser_websocket`, 403); the clients of its WebSocket (Codex, the SDKs)
send none. With client keys the key again does the job: a page cannot set the header that carries it.

Neither refusal is worth retrying: both carry `x-should-retry: false`. Imported by `q2api serve`
before the app (and prometheus_client) is: it imports nothing of the server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from starlette.requests import HTTPConnection, Request

from q2api.anthropic.errors import AnthropicError

JSON_MEDIA_TYPE = "application/json"
ANY_HOST = "*"
LOOPBACK_NAME = "localhost"
# On a refusal the same request would meet again (a wrong key, a Host not answered): the official
# SDKs, and Claude Code, read this header before the status, and do not retry.
NO_RETRY = {"x-should-retry": "false"}


def is_json_content_type(value: str | None) -> bool:
    """`application/json`, with or without parameters (`; charset=utf-8`), in any case."""
    return value is not None and value.partition(";")[0].strip().lower() == JSON_MEDIA_TYPE


def require_json(request: Request) -> None:
    """Raise a 415 unless the request says its body is JSON."""
    declared = request.headers.get("content-type")
    if not is_json_content_type(declared):
        shown = repr(declared[:100]) if declared else "none"
        raise AnthropicError(
            415,
            f"Content-Type must be application/json (got {shown}); with curl, add -H 'content-type: application/json'",
            error_type="invalid_request_error",
            headers=NO_RETRY,
        )


def refuse_browser_websocket(headers: Mapping[str, str]) -> None:
    """Raise a 403 for a WebSocket handshake a browser page made (it carries `Origin`)."""
    origin = headers.get("origin")
    if origin is not None:
        raise AnthropicError(
            403,
            f"a web page ({origin[:100]!r}) may not open this gateway's WebSocket: the gateway has no client keys, "
            "so any page the user visits could use it. Clients that are not browsers send no Origin header; a "
            "gateway with client keys (Q2API_API_KEYS or `q2api keys create`) takes keys instead",
            error_type="permission_error",
            headers=NO_RETRY,
        )


def is_loopback(name: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1); `name` is a host name without port or brackets."""
    if name == LOOPBACK_NAME:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The name in a `Host` header (lower case, no port, no brackets, no trailing dot), or None when malformed."""
    value = header.strip().lower()
    if value.startswith("["):  # an IPv6 address, with or without a port
        end = value.find("]")
        rest = value[end + 1 :]
        if end == -1 or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return value[1:end] or None
    name, colon, port = value.rpartition(":")
    if colon:
        if not port.isdigit():
            return None
        value = name
    return value.rstrip(".") or None


class HostAllowList:
    """The `Host` names a gateway without client keys answers: loopback ones and `allowed` (names as
    Q2API_ALLOWED_HOSTS gives them: `*.example.com` for every name below it, `*` for any)."""

    def __init__(self, allowed: Iterable[str], *, enforced: bool) -> None:
        names = frozenset(allowed)
        self._names = names
        # `*.example.com` → ".example.com": every name below it (not example.com itself).
        self._suffixes = tuple(name[1:] for name in names if name.startswith("*."))
        self.enforced = enforced and ANY_HOST not in names

    def allows(self, name: str) -> bool:
        return is_loopback(name) or name in self._names or name.endswith(self._suffixes)

    def check(self, request: HTTPConnection) -> None:
        """Raise a 403 unless the request's `Host` may be answered."""
        if not self.enforced:
            return
        header = request.headers.get("host", "")
        name = host_name(header)
        if name is not None and self.allows(name):
            return
        shown = repr(header[:100]) if header else "none"
        raise AnthropicError(
            403,
            f"this gateway has no client keys, so it answers only requests to a loopback name (localhost, "
            f"127.0.0.1, [::1]) or to a name listed in Q2API_ALLOWED_HOSTS; the Host header here is {shown}. "
            "Add that name to Q2API_ALLOWED_HOSTS, or set client keys (Q2API_API_KEYS)",
            headers=NO_RETRY,
        )


def open_gateway_warning(listen_host: str, *, has_client_keys: bool, allowed_hosts: Iterable[str]) -> str | None:
    """The start-up warning for a gateway without client keys that listens beyond loopback, if it is one."""
    if has_client_keys or is_loopback(listen_host.strip("[]").lower()):
        return None
    if ANY_HOST in allowed_hosts:
        answered = "every request is answered, whatever its Host (Q2API_ALLOWED_HOSTS=*)"
    else:
        answered = "only requests to a loopback name or to one of Q2API_ALLOWED_HOSTS are answered"
    return (
        f"listening on {listen_host} without client keys (Q2API_API_KEYS is empty): unless the store holds "
        f"client keys (`q2api keys list`), anyone who can reach this address can use the gateway and its Amazon Q "
        f"accounts; set Q2API_API_KEYS or create a key (`q2api keys create`), or listen on 127.0.0.1 "
        f"({answered})"
    )
