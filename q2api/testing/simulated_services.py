"""The simulator's `ListAvailableModels` and `GetUsageLimits` (docs/protocol.md#model-catalogue,
docs/protocol.md#credits), both wire flavours.

* REST: `GET /ListAvailableModels?origin=…&nextToken=…`, `GET /getUsageLimits?…`;
* awsJson: `POST /` with `X-Amz-Target: AmazonCodeWhispererService.ListAvailableModels` (or
  `.GetUsageLimits`) and the parameters as a JSON body.

It also answers `ListAvailableProfiles` (awsJson only, docs/protocol.md#profiles): `profiles` (none by
default, as for a Builder ID) or `profiles_by_account`; a Builder ID account (`builder_id_accounts`)
gets the 403 Amazon Q gives it, a Kiro API key the 403 "Unsupported token type".

A Kiro API key (`api_keys`) is accepted as the bearer only with `tokentype: API_KEY` (docs/protocol.md#kiro-api-keys):
`bearer_of` reads a request's credential that way for every handler.

Catalogue and credits are plain wire-shaped data a test sets, globally or per account (keyed by
the refresh token the account's access token was issued for). The catalogue is served in pages
of `page_size` with `nextToken`, and `reject_unknown_models` makes GenerateAssistantResponse
answer a model id outside the account's catalogue with 400 `INVALID_MODEL_ID`, as Amazon Q does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import orjson
from aiohttp import web

from q2api.models.table import SERVED_MODELS
from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.scripts import ErrorReply
from q2api.testing.simulated_reasoning import NATIVE_REASONING_SCHEMA

SERVICE_TARGET_PREFIX = "AmazonCodeWhispererService."
REST = "rest"
AWS_JSON = "aws_json"
MONTH = 30 * 24 * 3600
SIM_IDC_PROFILE_ARN = "arn:aws:codewhisperer:us-east-1:000000000000:profile/SIMULATEDIDC"
# What a Kiro API key sent without `tokentype: API_KEY` counts as: a credential nobody accepts.
KEY_WITHOUT_TOKEN_TYPE = "(an API key without tokentype)"


def bearer_of(headers: Mapping[str, str], api_keys: Collection[str]) -> str | None:
    """The request's bearer credential; an API key only counts with its `tokentype: API_KEY` header."""
    value = headers.get("Authorization", "")
    token = value[7:] if value.startswith("Bearer ") else None
    token_type = next((value for name, value in headers.items() if name.lower() == "tokentype"), "")
    if token is not None and token in api_keys and token_type.upper() != "API_KEY":
        return KEY_WITHOUT_TOKEN_TYPE
    return token


def profile_entry(arn: str, name: str = "q2api-simulated") -> dict[str, Any]:
    """One `profiles[]` entry of a `ListAvailableProfiles` answer."""
    return {"arn": arn, "profileName": name, "status": "ACTIVE"}


def catalogue_entry(
    model_id: str,
    *,
    name: str | None = None,
    max_input_tokens: int = 200_000,
    max_output_tokens: int = 64_000,
    input_types: tuple[str, ...] = ("TEXT", "IMAGE"),
    reasoning_schema: dict[str, Any] | None = None,
    prompt_cache: bool = True,
) -> dict[str, Any]:
    """One `models[]` entry of a `ListAvailableModels` answer; `reasoning_schema`: its
    `additionalModelRequestFieldsSchema` (a model that reasons natively, docs/protocol.md#native-thinking)."""
    entry: dict[str, Any] = {
        "modelId": model_id,
        "modelName": name or model_id,
        "description": f"simulated {model_id}",
        "tokenLimits": {"maxInputTokens": max_input_tokens, "maxOutputTokens": max_output_tokens},
        "supportedInputTypes": list(input_types),
        "supportsPromptCache": prompt_cache,
        "rateMultiplier": 1.0,
        "rateUnit": "credit",
    }
    if reasoning_schema is not None:
        entry["additionalModelRequestFieldsSchema"] = reasoning_schema
    return entry


def usage_document(
    used: float, limit: float, *, subscription: str = "KIRO FREE", resets_at: float | None = None
) -> dict[str, Any]:
    """A `getUsageLimits` answer with one breakdown entry."""
    reset = resets_at if resets_at is not None else time.time() + MONTH
    return {
        "nextDateReset": reset,
        "subscriptionInfo": {"subscriptionTitle": subscription},
        "usageBreakdownList": [
            {
                "resourceType": "AGENTIC_REQUEST",
                "currentUsage": int(used),
                "currentUsageWithPrecision": used,
                "usageLimit": int(limit),
                "usageLimitWithPrecision": limit,
                "nextDateReset": reset,
            }
        ],
    }


# The models the simulator lists as reasoning natively (PPK PR #97 saw Opus 4.8 do so live; its choice).
NATIVE_REASONING_MODELS = frozenset(SIMULATOR.names(assumptions.CATALOGUE_NATIVE_REASONING))


def default_catalogue() -> list[dict[str, Any]]:
    """The catalogue q2api.testing.assumptions describes (ids, context windows, which models reason natively
    and take cache points), as Amazon Q would list it; names and input types from the built-in table."""
    windows = dict(entry.split("=", 1) for entry in SIMULATOR.names(assumptions.CATALOGUE_CONTEXT_WINDOWS))
    cached = set(SIMULATOR.names(assumptions.CATALOGUE_PROMPT_CACHE))
    served = {model.q_model_id: model for model in SERVED_MODELS}
    entries = []
    for model_id in SIMULATOR.names(assumptions.CATALOGUE_MODEL_IDS):
        model = served.get(model_id)
        entries.append(
            catalogue_entry(
                model_id,
                name=model.display_name if model else None,
                max_input_tokens=int(windows.get(model_id, 200_000)),
                input_types=tuple(sorted(kind.upper() for kind in model.input_types)) if model else ("TEXT",),
                reasoning_schema=NATIVE_REASONING_SCHEMA if model_id in NATIVE_REASONING_MODELS else None,
                prompt_cache=model_id in cached,
            )
        )
    return entries


class SimulatedServices:
    def __init__(self, token_accounts: Mapping[str, str], token_accepted: Callable[[str | None], bool]) -> None:
        # token_accounts: access token -> the refresh token it was issued for, i.e. the account
        self._token_accounts = token_accounts
        self._token_accepted = token_accepted
        self.catalogue: list[dict[str, Any]] = default_catalogue()
        self.catalogue_by_account: dict[str, list[dict[str, Any]]] = {}
        self.default_model: str | None = "claude-sonnet-4.5"
        self.page_size = 4  # models per page at most (the client's maxResults may ask for fewer)
        self.usage: dict[str, Any] = usage_document(12.5, 50)
        self.usage_by_account: dict[str, dict[str, Any]] = {}
        # The wire flavours this host answers (awsJson always: the official clients' own).
        self.flavours: set[str] = {REST, AWS_JSON} if SIMULATOR.flag(assumptions.CATALOGUE_REST_FLAVOUR) else {AWS_JSON}
        self.failure: ErrorReply | None = None  # when set, both calls answer with it
        self.reject_unknown_models = False
        # Models an account's catalogue lists that GenerateAssistantResponse still refuses for it with 400
        # INVALID_MODEL_ID, by refresh token — the mismatch 9router#2882 and #2308 report (whatever
        # `reject_unknown_models` says).
        self.refused_models_by_account: dict[str, set[str]] = {}
        self.requests: list[tuple[str, str, dict[str, Any]]] = []  # (flavour, operation, parameters)
        self.api_keys: set[str] = set()  # Kiro API keys this upstream accepts (with tokentype: API_KEY)
        self.profiles: list[dict[str, Any]] = []  # ListAvailableProfiles for every account
        self.profiles_by_account: dict[str, list[dict[str, Any]]] = {}  # by refresh token
        self.builder_id_accounts: set[str] = set()  # refresh tokens of Builder ID logins: no profile
        self.profile_requests: list[str | None] = []  # the bearer of each ListAvailableProfiles call

    # -- what one account sees -------------------------------------------------

    def _account_of(self, access_token: str | None) -> str | None:
        return self._token_accounts.get(access_token) if access_token else None

    def catalogue_for(self, access_token: str | None) -> list[dict[str, Any]]:
        account = self._account_of(access_token)
        return self.catalogue_by_account.get(account or "", self.catalogue)

    def usage_for(self, access_token: str | None) -> dict[str, Any]:
        account = self._account_of(access_token)
        return self.usage_by_account.get(account or "", self.usage)

    def invalid_model(self, body: object, access_token: str | None) -> ErrorReply | None:
        """The 400 Amazon Q gives a model id outside the account's catalogue (when rejecting is on), or one
        refused for the account though its catalogue lists it (`refused_models_by_account`)."""
        try:
            model = body["conversationState"]["currentMessage"]["userInputMessage"].get("modelId")  # type: ignore[index]
        except (KeyError, TypeError, AttributeError):
            model = None
        if model in self.refused_models_by_account.get(self._account_of(access_token) or "", ()):
            return scripts.http_error(400, "ValidationException", "Invalid model id", reason="INVALID_MODEL_ID")
        if not self.reject_unknown_models:
            return None
        known = {entry["modelId"] for entry in self.catalogue_for(access_token)}
        if model in known:
            return None
        return scripts.http_error(400, "ValidationException", "Invalid model id", reason="INVALID_MODEL_ID")

    # -- the two calls ----------------------------------------------------------

    async def rest(self, request: web.Request) -> web.Response:
        """The REST flavour's handler (`GET /{operation}?…`)."""
        token = bearer_of(request.headers, self.api_keys)
        return self.answer(REST, request.path.strip("/"), dict(request.query), token)

    def answer(self, flavour: str, operation: str, params: Mapping[str, Any], access_token: str | None) -> web.Response:
        if not self._token_accepted(access_token):
            return _error(scripts.bearer_invalid())
        if operation.lower() == "listavailableprofiles" and flavour == AWS_JSON:
            self.profile_requests.append(access_token)
            return self._profiles(access_token)
        self.requests.append((flavour, operation, dict(params)))
        if flavour not in self.flavours:
            return _error(scripts.http_error(404, "UnknownOperationException", f"unknown operation {operation}"))
        if self.failure is not None:
            return _error(self.failure)
        if operation.lower() == "listavailablemodels":
            return _json(self._models_page(params, access_token))
        if operation.lower() == "getusagelimits":
            return _json(self.usage_for(access_token))
        return _error(scripts.http_error(400, "UnknownOperationException", f"unknown operation {operation}"))

    def _profiles(self, access_token: str | None) -> web.Response:
        if access_token in self.api_keys:
            message = SIMULATOR.text(assumptions.PROFILES_API_KEY_REFUSAL)
            return _error(scripts.http_error(403, "AccessDeniedException", message))
        account = self._account_of(access_token) or ""
        if account in self.builder_id_accounts:
            message = SIMULATOR.text(assumptions.PROFILES_BUILDER_ID_REFUSAL)
            return _error(scripts.http_error(403, "AccessDeniedException", message))
        return _json({"profiles": self.profiles_by_account.get(account, self.profiles)})

    def _models_page(self, params: Mapping[str, Any], access_token: str | None) -> dict[str, Any]:
        models = self.catalogue_for(access_token)
        start = int(params.get("nextToken") or 0)
        size = min(int(params.get("maxResults") or self.page_size), self.page_size)
        page: dict[str, Any] = {"models": models[start : start + size]}
        if self.default_model:
            page["defaultModel"] = {"modelId": self.default_model}
        if start + size < len(models):
            page["nextToken"] = str(start + size)
        return page


def _json(document: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(document), content_type="application/json")


def _error(reply: ErrorReply) -> web.Response:
    return web.Response(status=reply.status, body=reply.body, headers=dict(reply.headers))
