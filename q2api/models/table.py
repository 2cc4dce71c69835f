"""Claude model ids → Amazon Q model ids, and the list of models the gateway serves.

Clients send Anthropic ids in many spellings: dated (`claude-sonnet-4-5-20250929`), undated
(`claude-opus-4-8`), old style (`claude-3-7-sonnet-latest`), Bedrock style
(`anthropic.claude-sonnet-4-5-20250929-v1:0`), with Claude Code's `[1m]` suffix asking for the
1M-token context window, or an Amazon Q id directly (`claude-sonnet-4.5`). All of them are
normalised to one Q id. :data:`SERVED_MODELS` is the built-in table: the offline default when no
live catalogue is known (`q2api.amazonq.catalogue`, `q2api.models.resolution` resolve
against the live one). With the table alone, an id it does not know falls back to the configured
default, and `known` says so (the converter reports it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from q2api.amazonq.catalogue import (
    DEFAULT_CONTEXT_WINDOW,
    TEXT_AND_IMAGE,
    TEXT_ONLY,
    Catalogue,
    CatalogueModel,
    CatalogueSource,
)
from q2api.amazonq.reasoning_fields import ReasoningFields

LONG_CONTEXT_WINDOW = 1_000_000
LONG_CONTEXT_SUFFIX = "[1m]"
DEFAULT_Q_MODEL = "claude-sonnet-4.5"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model a request is sent to, with what the catalogue says about it."""

    q_model_id: str
    context_window: int
    known: bool
    # The input types the model reads (TEXT, IMAGE); the converter refuses any other part (an image to a
    # text-only model) with a 400 instead of letting the upstream fail or the part vanish.
    input_types: frozenset[str] = TEXT_AND_IMAGE
    max_output_tokens: int | None = None  # None: the catalogue did not say
    # The catalogue says the model takes `cachePoint`s (`supportsPromptCache`); unknown counts as no.
    prompt_cache: bool = False
    # Native reasoning (`additionalModelRequestFieldsSchema`); None: the `<thinking>` tag convention.
    reasoning: ReasoningFields | None = None


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model of the built-in table: `id` is the Claude-style id clients send."""

    id: str
    display_name: str
    q_model_id: str
    context_window: int = DEFAULT_CONTEXT_WINDOW
    input_types: frozenset[str] = TEXT_AND_IMAGE


SERVED_MODELS: tuple[ServedModel, ...] = (
    ServedModel("claude-opus-5-5", "Claude Opus 5.5", "claude-opus-5.5"),
    ServedModel("claude-sonnet-5-5", "Claude Sonnet 5.5", "claude-sonnet-5.5"),
    ServedModel("claude-haiku-5-5", "Claude Haiku 5.5", "claude-haiku-5.5"),
    ServedModel("claude-opus-4-8", "Claude Opus 4.8", "claude-opus-4.8"),
    ServedModel("claude-opus-4-5", "Claude Opus 4.5", "claude-opus-4.5"),
    ServedModel("claude-sonnet-4-5", "Claude Sonnet 4.5", "claude-sonnet-4.5"),
    ServedModel("claude-haiku-4-5", "Claude Haiku 4.5", "claude-haiku-4.5"),
    ServedModel("claude-sonnet-4", "Claude Sonnet 4", "claude-sonnet-4"),
    ServedModel("claude-3-7-sonnet", "Claude Sonnet 3.7", "claude-3.7-sonnet"),
)

_Q_IDS = frozenset(model.q_model_id for model in SERVED_MODELS) | {"auto"}

# anthropic.…, us.anthropic.…, global.anthropic.… (Bedrock model ids and cross-region profiles)
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
_DATE_OR_VERSION_SUFFIX = re.compile(r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?(?:-latest)?$")
# claude-opus-4-8, claude-sonnet-4, claude-haiku-4.5
_NEW_STYLE = re.compile(r"^claude-(?P<family>opus|sonnet|haiku)-(?P<major>\d+)(?:[-.](?P<minor>\d{1,2}))?$")
# claude-3-7-sonnet, claude-3.5-haiku
_OLD_STYLE = re.compile(r"^claude-(?P<major>\d+)(?:[-.](?P<minor>\d{1,2}))?-(?P<family>opus|sonnet|haiku)$")


def resolve_model(
    requested: str,
    *,
    aliases: Mapping[str, str] | None = None,
    default: str = DEFAULT_Q_MODEL,
) -> ModelChoice:
    """The Amazon Q model for a client's model id. `aliases` (from settings) maps Claude ids
    (case-insensitive, with or without `[1m]`) to Q ids and wins over the built-in table."""
    name = requested.strip().lower()
    window = DEFAULT_CONTEXT_WINDOW
    if name.endswith(LONG_CONTEXT_SUFFIX):
        name = name[: -len(LONG_CONTEXT_SUFFIX)]
        window = LONG_CONTEXT_WINDOW
    if aliases:
        lowered = {key.strip().lower(): value for key, value in aliases.items()}
        for key in (requested.strip().lower(), name):
            if key in lowered:
                return ModelChoice(lowered[key], window, True, input_types_of(lowered[key]))
    q_id = upstream_model_id(name)
    if q_id in _Q_IDS:
        return ModelChoice(q_id, window, True, input_types_of(q_id))
    fallback = upstream_model_id(default.strip().lower())
    q_id = fallback if fallback in _Q_IDS else default
    return ModelChoice(q_id, window, False, input_types_of(q_id))


def input_types_of(q_model_id: str) -> frozenset[str]:
    """The built-in capability table: the models of :data:`SERVED_MODELS` as listed, any other Claude
    model text and images (every Claude model reads images), any other model text only — until
    the account's live catalogue says otherwise."""
    for model in SERVED_MODELS:
        if model.q_model_id == q_model_id:
            return model.input_types
    return TEXT_AND_IMAGE if q_model_id.lower().startswith("claude-") or q_model_id == "auto" else TEXT_ONLY


THINKING_SUFFIX = "-thinking"
EFFORT_SUFFIXES = ("minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True, slots=True)
class ModelVariant:
    """What an id's suffixes ask for beyond the model: `-thinking` (thinking on) and an effort
    (`claude-4.5-opus-high`, the Cursor spelling; `-high-thinking` both)."""

    thinking: bool = False
    effort: str | None = None


PLAIN = ModelVariant()


def split_variant(name: str) -> tuple[str, ModelVariant]:
    """A lower-case id without its `-thinking` and effort suffixes, and what they asked for.
    Only Claude ids carry them: another model's id comes back whole."""
    base, thinking = (name[: -len(THINKING_SUFFIX)], True) if name.endswith(THINKING_SUFFIX) else (name, False)
    effort = None
    head, _, tail = base.rpartition("-")
    if tail in EFFORT_SUFFIXES and head:
        base, effort = head, tail
    if (thinking or effort) and model_family(base) is None:
        return name, PLAIN
    return base, ModelVariant(thinking, effort)


def split_long_context(requested: str) -> tuple[str, bool]:
    """The id lower-cased and stripped of Claude Code's `[1m]` suffix, and whether it had one."""
    name = requested.strip().lower()
    if name.endswith(LONG_CONTEXT_SUFFIX):
        return name[: -len(LONG_CONTEXT_SUFFIX)].strip(), True
    return name, False


def upstream_model_id(name: str) -> str:
    """The Amazon Q spelling of a lower-case Claude id (`claude-opus-4-6-20260101` → `claude-opus-4.6`);
    an id of no Claude shape comes back unchanged."""
    if name in _Q_IDS:
        return name
    name = _BEDROCK_PREFIX.sub("", name, count=1)
    name = _DATE_OR_VERSION_SUFFIX.sub("", name, count=1)
    match = _NEW_STYLE.match(name)
    if match:
        minor = match["minor"]
        version = f"{match['major']}.{minor}" if minor else match["major"]
        return f"claude-{match['family']}-{version}"
    match = _OLD_STYLE.match(name)
    if match:
        minor = match["minor"]
        version = f"{match['major']}.{minor}" if minor else match["major"]
        if int(match["major"]) >= 4:
            # Claude 4 and later are named family first; `claude-4.5-opus` (Cursor) is claude-opus-4.5.
            return f"claude-{match['family']}-{version}"
        return f"claude-{version}-{match['family']}"
    return name


def model_family(q_model_id: str) -> tuple[str, tuple[int, int]] | None:
    """`("opus", (4, 6))` for `claude-opus-4.6` (or any Claude spelling of it); None for other models."""
    name = upstream_model_id(q_model_id.strip().lower())
    for pattern in (_NEW_STYLE, _OLD_STYLE):
        match = pattern.match(name.replace(".", "-"))
        if match:
            return match["family"], (int(match["major"]), int(match["minor"] or 0))
    return None


def claude_style_id(q_model_id: str) -> str:
    """The id Claude clients know for an Amazon Q model: dashes for dots (`claude-opus-4.6` →
    `claude-opus-4-6`); a model of no Claude family keeps its upstream id."""
    if model_family(q_model_id) is None:
        return q_model_id
    return q_model_id.replace(".", "-")


def builtin_catalogue() -> Catalogue:
    """The built-in table as a catalogue (the offline default)."""
    models = tuple(
        CatalogueModel(
            model.q_model_id, model.display_name, max_input_tokens=model.context_window, input_types=model.input_types
        )
        for model in SERVED_MODELS
    )
    return Catalogue(models, source=CatalogueSource.BUILT_IN)


def newest_of_family(catalogue: Catalogue, family: str) -> CatalogueModel | None:
    """The highest-versioned model of `family` ("opus", "sonnet", "haiku") in `catalogue`, if any."""
    newest: CatalogueModel | None = None
    newest_version = (-1, -1)
    for model in catalogue.models:
        found = model_family(model.model_id)
        if found is not None and found[0] == family and found[1] > newest_version:
            newest, newest_version = model, found[1]
    return newest
