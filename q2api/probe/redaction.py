"""What may enter a probe report: redaction by construction.

A report holds statuses, shapes (event kinds, field names), sizes, numbers, ids the gateway made up,
and the upstream's error codes and messages. Every text that comes from the upstream goes through a
`Redactor` before it is kept, and a run's `Redactor` knows what must never appear: the account's
secrets (tokens, keys, the client registration, the proxy URL, the label, which may be an e-mail),
its profile ARN and the AWS account number in it, the probe's own prompts and every reply text the
run read. On top of those exact values it withholds what is shaped like a secret whoever it belongs
to: e-mail addresses, ARNs, 12-digit account numbers, long opaque tokens, URLs with credentials.

* `name(value)` — an identifier (field name, event kind, error code, model id): kept only when it
  looks like one and carries nothing known; else `REDACTED`;
* `message(value)` — an error message: secret-shaped parts replaced, the whole message withheld when
  it quotes a prompt or a reply (any four consecutive words of one), cut to MAX_MESSAGE_CHARS;
* `guard(text)` — the serialised report, a last time: any known value left is replaced (and counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import orjson

REDACTED = "‹redacted›"
WITHHELD = "‹withheld: it quoted prompt or reply text›"
MAX_MESSAGE_CHARS = 300
_MIN_SECRET_CHARS = 4  # shorter known values ("ok", "1") would redact ordinary words

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,63}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")
_ARN = re.compile(r"arn:aws[A-Za-z0-9\-]*:[^\s\"',;]*")
_ACCOUNT_NUMBER = re.compile(r"(?<!\d)\d{12}(?!\d)")
_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@\"']+@")
# Something that looks like a token: a long run of token characters with letters and digits both.
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_\-.~]{24,}")
_WORD = re.compile(r"\w+")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9+/=]{16,}")
_QUOTE_WORDS = 4  # this many consecutive words of a prompt or reply in a message: it quotes one


class Redactor:
    def __init__(self, secrets: Iterable[str | None] = (), texts: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._quotes: set[tuple[str, ...]] = set()  # runs of _QUOTE_WORDS words of the texts
        self._texts: set[str] = set()
        self._personal: set[str] = set()  # words that name someone (a label): whole words only
        self.guarded = 0  # known values the last guard still found (a bug if ever > 0)
        for secret in secrets:
            self.add_secret(secret)
        for text in texts:
            self.add_text(text)

    def add_secret(self, value: str | None) -> None:
        """A value that must never appear (a token, a key, an ARN): its ARN account number too."""
        if not value or len(value) < _MIN_SECRET_CHARS:
            return
        self._secrets.add(value)
        for number in _ACCOUNT_NUMBER.findall(value):
            self._secrets.add(number)
        if "://" in value and "@" in value:  # a proxy URL's user and password on their own
            userinfo = value.split("://", 1)[1].rsplit("@", 1)[0]
            for part in userinfo.split(":"):
                self.add_secret(part)

    def add_personal(self, value: str | None) -> None:
        """A name such as an account's label: withheld where it stands as a word of its own (a label such
        as `main` must not take `domain` with it)."""
        if value and value.strip():
            self._personal.add(value.strip())

    def add_text(self, text: str | None) -> None:
        """A prompt or a reply: never kept, not even quoted in part."""
        if not text or not text.strip():
            return
        if len(text.strip()) >= _MIN_SECRET_CHARS:
            self._texts.add(text.strip())
        words = [word.lower() for word in _WORD.findall(text)]
        self._quotes.update(_runs(words))

    def name(self, value: object) -> str:
        """An identifier as the report may hold it, else REDACTED."""
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            return REDACTED
        if self._knows(value) or value in self._personal or _ACCOUNT_NUMBER.search(value) or _looks_opaque(value):
            return REDACTED
        return value

    def names(self, values: Iterable[object]) -> tuple[str, ...]:
        return tuple(sorted({self.name(value) for value in values}))

    def message(self, value: object) -> str | None:
        """An upstream message as the report may hold it (None for none)."""
        if not isinstance(value, str) or not value.strip():
            return None
        if self._quotes_text(value):
            return WITHHELD
        text = value
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        for name in sorted(self._personal, key=len, reverse=True):
            text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", REDACTED, text)
        text = _URL_CREDENTIALS.sub(lambda match: match.group(0).split("://", 1)[0] + "://" + REDACTED + "@", text)
        for pattern in (_EMAIL, _ARN, _ACCOUNT_NUMBER):
            text = pattern.sub(REDACTED, text)
        text = _OPAQUE.sub(lambda match: REDACTED if _looks_opaque(match.group(0)) else match.group(0), text)
        text = " ".join(text.split())  # one line: no control characters, no layout
        return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"

    def guard(self, text: str) -> str:
        """The serialised report with any known secret or text still in it replaced (counted in `guarded`)."""
        for value in sorted(self._secrets | self._texts, key=len, reverse=True):
            for form in {value, _json_escaped(value)}:
                if form in text:
                    self.guarded += text.count(form)
                    text = text.replace(form, REDACTED)
        return text

    def _knows(self, value: str) -> bool:
        return any(secret in value for secret in self._secrets) or value in self._texts

    def _quotes_text(self, value: str) -> bool:
        if any(text in value for text in self._texts):
            return True
        words = [word.lower() for word in _WORD.findall(value)]
        return any(run in self._quotes for run in _runs(words))


def _looks_opaque(value: str) -> bool:
    """A long unbroken run of letters and digits mixed: a token, a key, a signature — not a word, a name or
    a model id such as `anthropic.claude-sonnet-4-5-20250929-v1:0`, whose runs are short."""
    return any(
        any(character.isdigit() for character in run) and any(character.isalpha() for character in run)
        for run in _ALNUM_RUN.findall(value)
    )


def _json_escaped(value: str) -> str:
    return orjson.dumps(value).decode()[1:-1]


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[index : index + _QUOTE_WORDS]) for index in range(len(words) - _QUOTE_WORDS + 1)}
