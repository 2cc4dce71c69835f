"""The simulated upstream's extra hosts: the same Amazon Q behind several addresses, each with the rules
one of the 2026 hosts keeps (docs/protocol.md#hosts).

`await sim.add_host(HostRules.runtime())` listens on one more loopback port of the same server (the
same scripts, tokens and records); what a request to that port breaks of its rules is answered the
way the real host answers it, before the request reaches the script:

* a token kind the host refuses → 403 "The bearer token included in the request is invalid.";
* no `profileArn` where the host requires one → 400 "profileArn is required for this request.";
* a legacy field (top-level `agentMode` / `systemPrompt`, `conversationState.agentContinuationId` /
  `agentTaskType`) → 400 "Improperly formed request." with reason `REQUEST_BODY_INVALID`.

Two rules play a host that fails every call whatever is sent, for the host walk (docs/protocol.md#hosts):

* `HostRules.resetting()` resets every connection once the request's headers have arrived, before any byte of
  an answer — the transport failure peers saw from a host being moved or filtered ("error sending
  request for url (https://q.ap-southeast-2.amazonaws.com/…)", kiro-account-manager #103, A8.1);
* `HostRules.not_found()` answers every call 404 — a host that does not serve the operation, one of
  the statuses peers move to the next host on (NR's `KIRO_ENDPOINT_FALLBACK_STATUSES = {401, 403, 404}`,
  A8.5). No source quotes the body of such a 404 (A8.1: what a deactivated host answers is unknown):
  `{"message": "Not Found"}` is the simulator's choice.

The token rule holds for the catalogue and credits calls too (a key check is a `getUsageLimits` call): `HostRules.refusing("api_key")` is a host that refuses Kiro API keys with
the 403 "bearer token invalid", as the runtime host does (A8.3: NR PR #3185, OR PR #11517).

`sim.gone.url()` is an address nothing listens on: connecting is refused, as with a host taken down.
"""

from __future__ import annotations

import dataclasses
import socket
from typing import Any

import orjson

from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.scripts import ErrorReply

# The token kinds each host takes (q2api.testing.assumptions), by kind.
_RUNTIME_TAKES = {
    "social": assumptions.RUNTIME_TAKES_SOCIAL,
    "idc": assumptions.RUNTIME_TAKES_IDC,
    "api_key": assumptions.RUNTIME_TAKES_API_KEY,
}
_Q_TAKES = {
    "social": assumptions.Q_TAKES_SOCIAL,
    "idc": assumptions.Q_TAKES_IDC,
    "api_key": assumptions.Q_TAKES_API_KEY,
}
LEGACY_TOP_LEVEL = ("agentMode", "systemPrompt")
LEGACY_STATE = ("agentContinuationId", "agentTaskType")


@dataclasses.dataclass
class HostRules:
    """What one simulated host refuses, and what it saw."""

    kind: str = "other"  # the `kind=` a gateway's AMAZONQ_ENDPOINT gives it (q2api.amazonq.hosts.HostKind)
    refuses_token_kinds: frozenset[str] = frozenset()  # "social", "idc", "api_key"
    requires_profile: bool = False
    rejects_legacy_fields: bool = False
    resets_connections: bool = False  # every connection reset before any byte of an answer
    answers_not_found: bool = False  # every call answered 404
    port: int = 0
    url: str = ""
    served: int = 0  # requests that passed its rules
    refused: int = 0

    @classmethod
    def runtime(cls, refuses: frozenset[str] | None = None) -> HostRules:
        """`runtime.<r>.kiro.dev`: social tokens with their profile only, no legacy fields (A8.3, A8.4);
        by default as q2api.testing.assumptions says."""
        return cls(
            kind="runtime",
            refuses_token_kinds=_refused_kinds(_RUNTIME_TAKES) if refuses is None else refuses,
            requires_profile=SIMULATOR.flag(assumptions.RUNTIME_REQUIRES_PROFILE),
            rejects_legacy_fields=SIMULATOR.flag(assumptions.RUNTIME_REFUSES_LEGACY_FIELDS),
        )

    @classmethod
    def legacy_q(cls) -> HostRules:
        """`q.<r>.amazonaws.com`: every token kind (A8.3), as q2api.testing.assumptions says."""
        return cls(
            kind="q",
            refuses_token_kinds=_refused_kinds(_Q_TAKES),
            requires_profile=SIMULATOR.flag(assumptions.Q_REQUIRES_PROFILE),
        )

    @classmethod
    def resetting(cls, kind: str = "q") -> HostRules:
        """A host that resets every connection before answering (A8.1, kiro-account-manager #103)."""
        return cls(kind=kind, resets_connections=True)

    @classmethod
    def not_found(cls, kind: str = "q") -> HostRules:
        """A host that answers every call 404 (A8.5: a status peers fail over on; the body is our choice)."""
        return cls(kind=kind, answers_not_found=True)

    @classmethod
    def refusing(cls, *token_kinds: str, kind: str = "q") -> HostRules:
        """A host that refuses these token kinds with 403 "bearer token invalid" (A8.3), every call alike."""
        return cls(kind=kind, refuses_token_kinds=frozenset(token_kinds))

    def before_answer(self, token_kind: str | None) -> ErrorReply | None:
        """What the host answers any call with before looking at it (404, a refused token kind); None: go on.
        A resetting host is played by the server, which drops the connection instead (`resets_connections`)."""
        if self.answers_not_found:
            self.refused += 1
            return _refusal(404, {"message": "Not Found"})
        if token_kind in self.refuses_token_kinds:
            self.refused += 1
            return scripts.bearer_invalid()
        return None

    @property
    def override_entry(self) -> str:
        """This host as an AMAZONQ_ENDPOINT entry."""
        return f"{self.kind}={self.url}" if self.kind != "other" else self.url

    def refusal(self, body: Any, token_kind: str | None, *, token_accepted: bool = True) -> ErrorReply | None:
        """The host's answer to a request that breaks its rules; None when it may be served.

        The token comes first, as on any AWS front end: one the host refuses by kind (A8.3), or one
        expired or unknown, is the 403 "bearer token invalid" before the body is looked at.
        """
        reply = self._check(body if isinstance(body, dict) else {}, token_kind, token_accepted)
        if reply is None:
            self.served += 1
        else:
            self.refused += 1
        return reply

    def _check(self, body: dict[str, Any], token_kind: str | None, token_accepted: bool) -> ErrorReply | None:
        if token_kind in self.refuses_token_kinds or not token_accepted:
            return scripts.bearer_invalid()
        if self.requires_profile and not body.get("profileArn"):
            return scripts.profile_required()
        state = body.get("conversationState")
        legacy_state = isinstance(state, dict) and any(field in state for field in LEGACY_STATE)
        if self.rejects_legacy_fields and (legacy_state or any(field in body for field in LEGACY_TOP_LEVEL)):
            return _refusal(400, {"message": "Improperly formed request.", "reason": "REQUEST_BODY_INVALID"})
        return None


def _refused_kinds(takes: dict[str, str]) -> frozenset[str]:
    return frozenset(kind for kind, key in takes.items() if not SIMULATOR.flag(key))


class GoneAddresses:
    """URLs of loopback ports nothing listens on, as hosts taken down: connecting is refused.

    Each port stays bound (never listening) until `close()`: a port let go at once could be taken by
    the next server anything on the machine starts — another test's, in a parallel run — and the
    host would be back.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._held: list[socket.socket] = []

    def url(self) -> str:
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.bind((self._host, 0))
        self._held.append(held)
        return f"http://{self._host}:{held.getsockname()[1]}/"

    def close(self) -> None:
        for held in self._held:
            held.close()
        self._held.clear()


def _refusal(status: int, document: dict[str, Any]) -> ErrorReply:
    """The body exactly as A8.4 quotes it (no error type: the runtime host sends none)."""
    return ErrorReply(status, orjson.dumps(document), {"Content-Type": "application/json"})
