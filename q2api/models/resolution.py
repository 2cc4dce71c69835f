"""A client's model id → a model the live catalogue has. Never a silent swap.

Spellings that name the same model all resolve to it: dated ids (`claude-opus-4-6-20260101`),
`-latest`, Bedrock ids (`anthropic.claude-opus-4-6-v1:0`), dots or dashes (`claude-opus-4.6`),
Claude Code's `[1m]` suffix, Cursor's version-first ids (`claude-4.5-opus-high`), upstream ids of
other models, and the operator's aliases. A `-thinking` suffix (`claude-sonnet-4-5-thinking`)
and an effort suffix (`-low` … `-max`) name the base model and ask for thinking / that effort
(`Resolution.variant`; the relay applies it to a request that did not say otherwise).

An id the catalogue lacks is served as the policy says (`Q2API_UNKNOWN_MODEL`):

* `family`: the newest model of the same family (opus / sonnet / haiku) — a substitution, which
  the caller logs and names in a response header; no model of that family → `ModelNotAvailable`;
* `reject`: `ModelNotAvailable`;
* `default`: the configured default model (a substitution too).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from q2api.amazonq.catalogue import Catalogue, CatalogueModel
from q2api.models.table import (
    DEFAULT_Q_MODEL,
    LONG_CONTEXT_WINDOW,
    PLAIN,
    ModelChoice,
    ModelVariant,
    claude_style_id,
    model_family,
    newest_of_family,
    split_long_context,
    split_variant,
    upstream_model_id,
)


class UnknownModelPolicy(enum.StrEnum):
    FAMILY = "family"
    REJECT = "reject"
    DEFAULT = "default"


class ModelNotAvailable(Exception):
    """No available model may serve the requested id; the message lists what is available."""

    def __init__(self, requested: str, available: tuple[str, ...], why: str) -> None:
        self.requested = requested
        self.available = available
        listing = ", ".join(available) if available else "none"
        super().__init__(f"model {requested!r} is not available ({why}); available models: {listing}")


@dataclass(frozen=True, slots=True)
class Resolution:
    choice: ModelChoice
    requested: str
    substituted: bool  # served by another model than the one asked for
    why: str = ""  # for a substitution: the policy that chose it
    variant: ModelVariant = PLAIN  # what the id's `-thinking` / effort suffixes asked for


def resolve_against_catalogue(
    requested: str,
    catalogue: Catalogue,
    *,
    aliases: Mapping[str, str] | None = None,
    policy: UnknownModelPolicy = UnknownModelPolicy.FAMILY,
    default_model: str | None = None,
) -> Resolution:
    """The catalogue model serving `requested`. Raises ModelNotAvailable."""
    name, long_context = split_long_context(requested)
    target = _alias_target(requested, name, aliases or {})
    exact = split_long_context(target)[0] if target else name
    variant = PLAIN
    if catalogue.get(exact) is None:
        exact, variant = split_variant(exact)
    wanted = upstream_model_id(exact)
    # The id as given first: normalising would cut a `-v1` that belongs to a non-Claude model's id.
    found = catalogue.get(exact) or catalogue.get(wanted)
    if found is not None:
        return Resolution(_choice(found, long_context, known=True), requested, substituted=False, variant=variant)

    available = _listing(catalogue)
    if policy is UnknownModelPolicy.REJECT:
        raise ModelNotAvailable(requested, available, "Q2API_UNKNOWN_MODEL=reject")
    if policy is UnknownModelPolicy.DEFAULT:
        fallback = upstream_model_id((default_model or catalogue.default_model or DEFAULT_Q_MODEL).strip().lower())
        substitute = catalogue.get(fallback)
        if substitute is None:
            raise ModelNotAvailable(requested, available, f"the default model {fallback!r} is not available either")
        return Resolution(_choice(substitute, long_context, known=False), requested, True, "default model", variant)
    family = model_family(wanted)
    if family is None:
        raise ModelNotAvailable(requested, available, "it belongs to no known model family")
    substitute = newest_of_family(catalogue, family[0])
    if substitute is None:
        raise ModelNotAvailable(requested, available, f"no {family[0]} model is available")
    return Resolution(_choice(substitute, long_context, known=False), requested, True, f"newest {family[0]}", variant)


def _alias_target(requested: str, name: str, aliases: Mapping[str, str]) -> str | None:
    lowered = {key.strip().lower(): value for key, value in aliases.items()}
    for key in (requested.strip().lower(), name):
        if key in lowered:
            return lowered[key].strip().lower()
    return None


def _choice(model: CatalogueModel, long_context: bool, *, known: bool) -> ModelChoice:
    # The catalogue's window is the truth; without one, `[1m]` says what the client expects.
    window = model.max_input_tokens or (LONG_CONTEXT_WINDOW if long_context else model.context_window)
    return ModelChoice(
        model.model_id,
        window,
        known,
        model.input_types,
        model.max_output_tokens,
        prompt_cache=bool(model.prompt_cache),
        reasoning=model.reasoning,
    )


def _listing(catalogue: Catalogue) -> tuple[str, ...]:
    return tuple(claude_style_id(model_id) for model_id in catalogue.ids)
