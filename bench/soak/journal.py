"""What the soak's clients and operators saw, kept for the invariants at the end.

Every request a client sends ends as one `Answer` (an HTTP status, or `CLIENT_GAVE_UP` when no status
came back); what only the operators know (when a key was revoked, when an account was imported, which
stored responses exist, what a command-line call answered) has a record of its own.
"""

from __future__ import annotations

import dataclasses
import time

CLIENT_GAVE_UP = 0  # the status of a request that never got one (a reset, a timeout, a client that left)
ENV_KEY = "(environment key)"  # the key label of requests made with a Q2API_API_KEYS key


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    actor: str  # which client behaviour sent it
    key: str  # the store key's label, or ENV_KEY
    door: str  # messages, chat, responses, ...
    target: str  # the base URL of the process (replica) it went to
    status: int
    started: float  # wall-clock seconds
    ended: float
    faulted: bool = False  # the request asked the simulated Amazon Q to fail it
    error: str = ""  # the error type and message of a non-2xx answer, as the client read them
    worker: int | None = None  # the gateway process that served it, where the client found out
    request_id: str | None = None  # the gateway's `request-id` header, where an answer came back


@dataclasses.dataclass(frozen=True, slots=True)
class StoredResponse:
    response_id: str
    key: str
    target: str


@dataclasses.dataclass(frozen=True, slots=True)
class CommandRun:
    args: tuple[str, ...]
    returncode: int
    stderr_tail: str
    started: float
    ended: float


class Journal:
    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.stored: list[StoredResponse] = []
        self.commands: list[CommandRun] = []
        self.polls: list[Answer] = []  # admin API, console, /metrics, /readyz
        self.revoked: dict[str, float] = {}  # key label → when its revocation was acknowledged
        self.imported: dict[str, float] = {}  # account label → when its import was acknowledged

    def answer(self, **fields: object) -> Answer:
        fields.setdefault("ended", time.time())
        answer = Answer(**fields)  # type: ignore[arg-type]
        self.answers.append(answer)
        return answer

    def answers_of(self, actor: str) -> list[Answer]:
        return [answer for answer in self.answers if answer.actor == actor]
