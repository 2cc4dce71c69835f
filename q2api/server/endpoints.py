"""The endpoints beside the front doors: models, health, metrics, readiness (module level, Starlette's
idiom: each reaches the gateway and the app's Host allow list through its request)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.model_list import list_models_page
from q2api.frontdoors.responses.codex_models import CLIENT_VERSION_PARAM, codex_models
from q2api.openai.shapes import model_entry_fields, model_list
from q2api.server import metrics
from q2api.server.admission import admit
from q2api.server.edge import json_response
from q2api.server.gateway import gateway_of
from q2api.server.lifecycle.tenancy import Caller
from q2api.server.readiness import readiness

MODELS_OWNER = "amazon-q"  # `owned_by` of each /v1/models entry: who serves it here


def _may_see(caller: Caller, model_id: str) -> bool:
    """A store key limited to some models is shown only those."""
    allowed = caller.key.limits.models if caller.key is not None else None
    return allowed is None or model_id in allowed


async def list_models(request: Request) -> Response:
    caller = await admit(request)
    entries = [entry for entry in gateway_of(request).models.entries() if _may_see(caller, entry["id"])]
    # One list for both SDKs: the Anthropic page, each entry also in the OpenAI shape.
    page = model_list(list_models_page(entries, request.query_params), owned_by=MODELS_OWNER)
    if CLIENT_VERSION_PARAM in request.query_params:  # Codex: its catalogue, every model at once
        page["models"] = codex_models(entries)
    return json_response(page)


async def retrieve_model(request: Request) -> Response:
    caller = await admit(request)
    model_id = request.path_params["model_id"]
    entry = gateway_of(request).models.entry(model_id)
    if entry is None or not (_may_see(caller, entry["id"]) or _may_see(caller, model_id)):
        raise AnthropicError(
            404,
            f"model {model_id!r} is not served here: GET /v1/models lists the models this gateway serves",
            error_type="not_found_error",
        )
    return json_response({**model_entry_fields(MODELS_OWNER), **entry})


async def healthz(request: Request) -> Response:
    # Liveness plus each account's health and last known credits (labels only, never a credential).
    gateway = gateway_of(request)
    accounts = [
        {
            "id": view.account_id,
            "label": view.label,
            "health": view.health,
            "resting_seconds": round(view.resting_for),
            "credits": known.as_dict() if (known := gateway.discovery.credits(view.account_id)) else None,
        }
        for view in gateway.pool.health()
    ]
    return json_response({"status": "ok", "accounts": accounts})


async def metrics_endpoint(request: Request) -> Response:
    # No auth, like /healthz: it holds counts and account labels, never a secret.
    accounts = [
        metrics.AccountState(view.account_id, view.label, view.health) for view in gateway_of(request).pool.health()
    ]
    return Response(metrics.render(accounts), media_type=metrics.CONTENT_TYPE)


async def readyz(request: Request) -> Response:
    gateway = gateway_of(request)
    reason = await readiness(gateway.store, gateway.pool, gateway.reloader)
    if reason is None:
        note = gateway.pool.resting_note()
        return json_response({"status": "ready", **({"note": note} if note else {})})
    return json_response({"status": "not_ready", "reason": reason}, 503)


# Every route but the doors' (q2api.server.doors); `counted`: whether /metrics counts its requests
# under its own path (any other is counted as "other").
SHELL_ROUTES: tuple[tuple[Route, bool], ...] = (
    (Route("/v1/models", list_models, methods=["GET"]), True),
    (Route("/v1/models/{model_id}", retrieve_model, methods=["GET"]), False),
    (Route("/healthz", healthz, methods=["GET"]), True),
    (Route("/metrics", metrics_endpoint, methods=["GET"]), True),
    (Route("/readyz", readyz, methods=["GET"]), True),
)
