"""The models an account may use, as `ListAvailableModels` lists them (docs/protocol.md#model-catalogue).

Catalogues differ by plan and region, so each account has its own. The built-in table
(`q2api.models.table`) is the catalogue of last resort, when Amazon Q cannot be asked and no
earlier answer is at hand.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from q2api.amazonq.reasoning_fields import ReasoningFields, parse_reasoning_fields
from q2api.amazonq.service_api import LIST_AVAILABLE_MODELS, ORIGIN, ServiceApi

# Input types as `ListAvailableModels.supportedInputTypes` names them (lower-cased).
TEXT = "text"
IMAGE = "image"
TEXT_AND_IMAGE: frozenset[str] = frozenset({TEXT, IMAGE})
TEXT_ONLY: frozenset[str] = frozenset({TEXT})
# The context window of a model whose catalogue entry gives none.
DEFAULT_CONTEXT_WINDOW = 200_000

PAGE_SIZE = 50
MAX_PAGES = 20  # a service that hands out next tokens forever must not keep us paging forever


class CatalogueSource(enum.Enum):
    LIVE = "live"  # the latest answer from Amazon Q
    LAST_GOOD = "last_good"  # the latest call failed; an earlier answer stands in
    BUILT_IN = "built_in"  # never answered: the built-in table


@dataclass(frozen=True, slots=True)
class CatalogueModel:
    model_id: str  # the upstream id, as sent in `modelId`
    display_name: str
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    input_types: frozenset[str] = TEXT_AND_IMAGE  # "text", "image"
    description: str = ""
    # `supportsPromptCache` (docs/protocol.md#model-catalogue): None when the catalogue does not say.
    prompt_cache: bool | None = None
    # Native reasoning, from `additionalModelRequestFieldsSchema` (docs/protocol.md#native-thinking); None = the `<thinking>` tag convention.
    reasoning: ReasoningFields | None = None

    @property
    def context_window(self) -> int:
        return self.max_input_tokens or DEFAULT_CONTEXT_WINDOW


@dataclass(frozen=True, slots=True)
class Catalogue:
    models: tuple[CatalogueModel, ...]
    default_model: str | None = None
    source: CatalogueSource = CatalogueSource.LIVE
    fetched_at: float | None = None  # Unix time of the answer it holds
    _by_id: dict[str, CatalogueModel] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {model.model_id.lower(): model for model in self.models})

    def get(self, model_id: str) -> CatalogueModel | None:
        """The model with this upstream id (case does not matter)."""
        return self._by_id.get(model_id.lower())

    def __contains__(self, model_id: object) -> bool:
        return isinstance(model_id, str) and model_id.lower() in self._by_id

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(model.model_id for model in self.models)

    def with_source(self, source: CatalogueSource) -> Catalogue:
        return Catalogue(self.models, self.default_model, source, self.fetched_at)


def merge_catalogues(catalogues: Iterable[Catalogue]) -> Catalogue:
    """Every model any of the catalogues has, once (the first account's description wins)."""
    models: dict[str, CatalogueModel] = {}
    default_model = None
    sources = []
    for catalogue in catalogues:
        sources.append(catalogue.source)
        default_model = default_model or catalogue.default_model
        for model in catalogue.models:
            models.setdefault(model.model_id.lower(), model)
    source = min(sources, key=list(CatalogueSource).index) if sources else CatalogueSource.BUILT_IN
    return Catalogue(tuple(models.values()), default_model, source)


def parse_models_page(document: Mapping[str, Any]) -> tuple[list[CatalogueModel], str | None, str | None]:
    """One `ListAvailableModels` answer → (models, defaultModel id, nextToken). Entries without a
    `modelId` are skipped; every other field is optional."""
    models = []
    for entry in document.get("models") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("modelId"), str) or not entry["modelId"]:
            continue
        limits = entry.get("tokenLimits")
        if not isinstance(limits, dict):
            limits = {}
        types = entry.get("supportedInputTypes")
        input_types = (
            frozenset(str(kind).lower() for kind in types if isinstance(kind, str))
            if isinstance(types, list)
            else TEXT_AND_IMAGE
        )
        models.append(
            CatalogueModel(
                model_id=entry["modelId"],
                display_name=_text(entry.get("modelName")) or entry["modelId"],
                max_input_tokens=_positive(limits.get("maxInputTokens")),
                max_output_tokens=_positive(limits.get("maxOutputTokens")),
                input_types=input_types or frozenset({"text"}),
                description=_text(entry.get("description")) or "",
                prompt_cache=cache if isinstance(cache := entry.get("supportsPromptCache"), bool) else None,
                reasoning=parse_reasoning_fields(entry.get("additionalModelRequestFieldsSchema")),
            )
        )
    default = document.get("defaultModel")
    default_id = default.get("modelId") if isinstance(default, dict) else default
    return models, _text(default_id), _text(document.get("nextToken"))


async def fetch_catalogue(
    api: ServiceApi,
    token: str,
    *,
    profile_arn: str | None,
    fetched_at: float | None = None,
    token_type: str | None = None,
    proxy_url: str | None = None,
) -> Catalogue:
    """Every page of the account's catalogue. Raises the `q2api.amazonq.errors` classes."""
    models: list[CatalogueModel] = []
    default_model = None
    next_token: str | None = None
    for _ in range(MAX_PAGES):
        params: dict[str, str | int] = {"origin": ORIGIN, "maxResults": PAGE_SIZE}
        if profile_arn:
            params["profileArn"] = profile_arn
        if next_token:
            params["nextToken"] = next_token
        answer = await api.call(LIST_AVAILABLE_MODELS, params, token, token_type=token_type, proxy_url=proxy_url)
        page, page_default, next_token = parse_models_page(answer)
        models.extend(page)
        default_model = default_model or page_default
        if not next_token:
            break
    unique: dict[str, CatalogueModel] = {}
    for model in models:
        unique.setdefault(model.model_id.lower(), model)  # the first listing of an id wins
    return Catalogue(tuple(unique.values()), default_model, CatalogueSource.LIVE, fetched_at)


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _positive(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return int(value)
