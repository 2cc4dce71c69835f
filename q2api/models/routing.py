"""Which upstream model serves a request, and what `GET /v1/models` lists — both from the live catalogue.

The server is where the two protocols meet: the catalogue is Amazon Q's, the ids, errors and list
entries are Anthropic's. A substitution (`Q2API_UNKNOWN_MODEL`) is named in the
`x-q2api-upstream-model` header of the reply and in the request's log line (`upstream_model`), and
logged at WARNING the first time each requested id is substituted (a client such as Claude Code
sends the same id on every request: after the first, DEBUG). A `max_tokens` above the model's
output limit is clamped, and logged when the client asked for it (a door's own default is not news).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from loguru import logger

from q2api.amazonq.catalogue import Catalogue
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.model_list import model_info
from q2api.anthropic.types import UNSTATED_MAX_TOKENS, MessagesRequest, OutputConfig, ThinkingConfig
from q2api.log_text import one_line
from q2api.models.capabilities import model_capabilities
from q2api.models.resolution import (
    ModelNotAvailable,
    Resolution,
    UnknownModelPolicy,
    resolve_against_catalogue,
)
from q2api.models.table import ModelChoice, ModelVariant, claude_style_id, model_family

UPSTREAM_MODEL_HEADER = "x-q2api-upstream-model"
# How many (requested, upstream) substitutions are remembered as already warned about; beyond it
# (a client cycling through made-up ids), each one is a WARNING again.
_SUBSTITUTIONS_REMEMBERED = 1000


class ModelRouter:
    def __init__(
        self,
        catalogue: Callable[[], Catalogue],
        *,
        aliases: Mapping[str, str] | None = None,
        policy: UnknownModelPolicy = UnknownModelPolicy.FAMILY,
        default_model: str | None = None,
        on_unknown: Callable[[], None] | None = None,
    ) -> None:
        self._catalogue = catalogue
        self._aliases = dict(aliases or {})
        self._policy = policy
        self._default_model = default_model
        self._on_unknown = on_unknown  # e.g. read the catalogues again: the model may be new
        self._substitutions_told: set[tuple[str, str]] = set()  # (requested, upstream) already warned about

    def resolve(self, requested: str) -> Resolution:
        """The model for `requested`; raises a 404 `not_found_error` naming what is available."""
        try:
            resolution = resolve_against_catalogue(
                requested,
                self._catalogue(),
                aliases=self._aliases,
                policy=self._policy,
                default_model=self._default_model,
            )
        except ModelNotAvailable as missing:
            self._unknown()
            raise AnthropicError(404, str(missing), error_type="not_found_error") from None
        if resolution.substituted:
            self._unknown()
            pair = (requested, resolution.choice.q_model_id)
            level = "DEBUG" if pair in self._substitutions_told else "WARNING"
            if len(self._substitutions_told) < _SUBSTITUTIONS_REMEMBERED:  # client-chosen ids: bounded
                self._substitutions_told.add(pair)
            logger.log(
                level,
                f"model substituted: requested={one_line(requested)} upstream={resolution.choice.q_model_id} "
                f"({resolution.why}; Q2API_UNKNOWN_MODEL={self._policy.value})",
            )
        return resolution

    def _unknown(self) -> None:
        if self._on_unknown is not None:
            self._on_unknown()

    def entries(self) -> list[dict[str, Any]]:
        """`GET /v1/models`: Claude-style ids for Claude models, upstream ids for the others, then the
        operator's aliases whose model is available."""
        catalogue = self._catalogue()
        entries = []
        for model in catalogue.models:
            family = model_family(model.model_id)
            entries.append(
                model_info(
                    claude_style_id(model.model_id),
                    model.display_name,
                    model.max_input_tokens,
                    max_tokens=model.max_output_tokens,
                    capabilities=model_capabilities(model.input_types, model.reasoning),
                    line=family[0] if family else None,
                    owned_by="anthropic" if family else "amazon-q",
                )
            )
        listed = {entry["id"] for entry in entries}
        for alias in self._aliases:
            if alias in listed:
                continue
            try:
                choice = resolve_against_catalogue(
                    alias, catalogue, aliases=self._aliases, policy=UnknownModelPolicy.REJECT
                ).choice
            except ModelNotAvailable:
                continue
            entries.append(
                model_info(
                    alias,
                    alias,
                    choice.context_window,
                    max_tokens=choice.max_output_tokens,
                    capabilities=model_capabilities(choice.input_types, choice.reasoning),
                    line=family[0] if (family := model_family(choice.q_model_id)) else None,
                )
            )
            listed.add(alias)
        return entries

    def entry(self, model_id: str) -> dict[str, Any] | None:
        """`GET /v1/models/{id}`: the listed entry of `model_id`, or of the served model another
        spelling of it names (a dated id, `[1m]`, an Amazon Q id); None when no served model is it.
        Never a substitute: the model asked about is the one described, or none."""
        entries = self.entries()
        by_id = {entry["id"]: entry for entry in entries}
        if model_id in by_id:
            return by_id[model_id]
        try:
            choice = resolve_against_catalogue(
                model_id, self._catalogue(), aliases=self._aliases, policy=UnknownModelPolicy.REJECT
            ).choice
        except ModelNotAvailable:
            return None
        return by_id.get(claude_style_id(choice.q_model_id))


def clamp_max_tokens(request: MessagesRequest, choice: ModelChoice) -> MessagesRequest:
    """`request` with `max_tokens` at most the model's output limit (logged when lowered: at INFO
    when the client asked for more, at DEBUG when an OpenAI door's client set no limit and the door
    asked for UNSTATED_MAX_TOKENS, "as much as the model gives")."""
    limit = choice.max_output_tokens
    if limit is None or request.max_tokens <= limit:
        return request
    level = "DEBUG" if request.max_tokens == UNSTATED_MAX_TOKENS else "INFO"
    logger.log(level, f"max_tokens clamped: requested={request.max_tokens} limit={limit} model={choice.q_model_id}")
    return msgspec.structs.replace(request, max_tokens=limit)


def with_variant(request: MessagesRequest, variant: ModelVariant) -> MessagesRequest:
    """`request` with what its model id's suffixes asked for (`-thinking`, an effort), unless the
    request itself says otherwise (its own `thinking` / `output_config.effort` win)."""
    changes: dict[str, object] = {}
    if variant.thinking and request.thinking is None:
        changes["thinking"] = ThinkingConfig(type="enabled")
    if variant.effort and (request.output_config is None or request.output_config.effort is None):
        changes["output_config"] = OutputConfig(effort=variant.effort)
    return msgspec.structs.replace(request, **changes) if changes else request
