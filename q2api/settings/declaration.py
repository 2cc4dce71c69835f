"""What one setting is: its variable, parser, default, group, description, and how it is shown.

A `Settings` field is declared by :func:`setting`, which returns a dataclass
field carrying a :class:`Variable` in its metadata. That one declaration is
what the loader, the `serve` flags, the typo check, `docs/configuration.md`
and `.env.example` all read, so none of them can disagree with the others.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, TypeVar, cast

from q2api.settings.parsers import Parser

T = TypeVar("T")

METADATA_KEY = "q2api.setting"


class Group(Enum):
    """The concerns the settings are grouped by, in the order the reference shows them.

    Summaries and descriptions are Markdown; their links are relative to `docs/` (the reference's folder).
    """

    CLIENT_ACCESS = ("Client access", "Who may call the gateway.")
    ACCOUNT = (
        "The account from the environment",
        "One Amazon Q account can be given in the environment; `q2api login`, `q2api accounts add` and "
        "`q2api accounts import` keep more in the store. A token given here seeds the store, and once Amazon Q "
        "rotates it the store's newer token wins over the environment on restart. See "
        "[Accounts](accounts.md#one-account-in-the-environment).",
    )
    UPSTREAM = ("Amazon Q endpoints and retries", "Where the gateway sends requests and token refreshes.")
    STORE = (
        "Account store",
        "Where accounts and rotated tokens are kept. See [Deployment](deployment.md#several-replicas) for a "
        "store shared by several replicas.",
    )
    CONVERSION = (
        "Conversion and guards",
        "What the gateway checks in a conversation before sending it to Amazon Q. See "
        "[Tool loops](troubleshooting-infinite-loop.md) for the loop guard.",
    )
    STREAMING = ("Streaming and timeouts", "How long the gateway waits, for Amazon Q and for its clients.")
    TRANSPORT = (
        "Transport limits",
        "What one client connection may cost a worker. Each is also a `q2api serve` flag, which wins over "
        "the variable. See [Deployment](deployment.md#workers) for when to raise them, and "
        "[Troubleshooting](troubleshooting.md#408-431-or-503-from-the-gateway-itself) for their refusals.",
    )
    MODELS = (
        "Models and credits",
        "Which Amazon Q model serves a Claude model id, and how often they are read. See [Clients](clients.md#models).",
    )
    LOGGING = ("Logging and debugging", "What the gateway writes to stderr. See [Operating](operating.md#logs).")
    ADMIN = (
        "Admin API and console",
        "The operator's side of the gateway. See [Operating](operating.md#the-admin-api).",
    )

    def __init__(self, title: str, summary: str) -> None:
        self.title = title
        self.summary = summary


@dataclasses.dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable and the `Settings` field it sets."""

    name: str
    parser: Parser[T]
    default: T
    group: Group
    description: str
    secret: bool = False
    # `q2api serve --<field-name>` sets it, with this metavar (None: no flag).
    flag_metavar: str | None = None
    # Set on a deprecated variable: what replaces it. Still read, with a start-up warning.
    deprecated: str | None = None
    # How the value appears in `repr(settings)`; None: masked when secret, else repr().
    shown_as: Callable[[T], str] | None = None
    field: str = ""  # the Settings field, filled in when the class is built

    @property
    def default_text(self) -> str:
        """The default as `.env` text; always empty for a secret."""
        return "" if self.secret else self.parser.write(self.default)

    @property
    def flag(self) -> str | None:
        return "--" + self.field.replace("_", "-") if self.flag_metavar else None

    def shown(self, value: T) -> str:
        if self.shown_as is not None:
            return self.shown_as(value)
        if self.secret:
            return mask_secret(value if isinstance(value, str) else None)
        return repr(value)


def mask_secret(value: str | None) -> str:
    """Says whether a secret is set (and its length) without revealing any of it."""
    if not value:
        return "unset"
    return f"<secret, {len(value)} chars>"


def setting(
    name: str,
    parser: Parser[T],
    *,
    default: T,
    group: Group,
    description: str,
    secret: bool = False,
    flag_metavar: str | None = None,
    deprecated: str | None = None,
    shown_as: Callable[[T], str] | None = None,
) -> T:
    """Declares a `Settings` field read from the variable `name`.

    Typed as returning `T` so that `field: T = setting(...)` type-checks the
    parser and the default against the field's annotation; at run time it
    returns the dataclass field that carries the declaration.
    """
    if secret and default is not None and default != ():
        raise ValueError(f"{name}: a secret has no default value")
    variable = Variable(
        name=name,
        parser=parser,
        default=default,
        group=group,
        description=textwrap.dedent(description).strip(),
        secret=secret,
        flag_metavar=flag_metavar,
        deprecated=deprecated,
        shown_as=shown_as,
    )
    metadata = {METADATA_KEY: variable}
    field: Any
    if getattr(type(default), "__hash__", None) is None:  # e.g. a mapping: dataclasses want a factory
        field = dataclasses.field(default_factory=lambda: default, metadata=metadata)
    else:
        field = dataclasses.field(default=default, metadata=metadata)
    return cast(T, field)


def declared_variables(settings_class: type) -> tuple[Variable[Any], ...]:
    """The declarations of a dataclass built with :func:`setting`, in field order, each knowing its field."""
    variables = []
    for field in dataclasses.fields(settings_class):
        variable: Variable[Any] | None = field.metadata.get(METADATA_KEY)
        if variable is not None:
            variables.append(dataclasses.replace(variable, field=field.name))
    return tuple(variables)
