"""Prometheus metrics (`GET /metrics`), correct however many `--workers` serve.

`q2api serve` points ``PROMETHEUS_MULTIPROC_DIR`` at a private directory made
for the run (see :mod:`q2api.cli.metrics_dir`) before any worker starts, so
``prometheus_client`` keeps every value in per-process memory-mapped files
there, and a scrape answered by any worker merges them all:

* counters and histograms of every worker, a worker that died included (its
  counts happened; dropping them would make the totals go backwards);
* the active-streams gauge summed over the *live* workers only: files of a
  dead worker are removed at the next scrape (:func:`_forget_dead_workers`);
* credits, the value written most recently by any worker.

Without that variable (the gateway embedded in tests or the demo) the same
metrics live in this process alone. Account health is not stored at all: it
is read from the answering worker's account pool at scrape time, so a removed
account disappears instead of lingering as a stale series.

Labels are bounded and never secret: routes are the known route templates,
`model` is the Amazon Q model id a request was served with (the Claude
spellings clients send are unbounded), accounts appear by id and label.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from q2api.accounts.session_affinity import AffinityObserver, TurnOutcome
from q2api.amazonq.observer import UpstreamObserver

MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
OTHER_ROUTE = "other"
NO_MODEL = "-"

# From a scrape (milliseconds) to a long agentic turn (minutes).
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600)

# `*_created` timestamps exist only in single-process mode; without them both modes expose the same series.
disable_created_metrics()  # type: ignore[no-untyped-call]
_REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "q2api_requests",
    "HTTP requests answered, by route, Amazon Q model and status (499: the client left).",
    ["route", "model", "status"],
    registry=_REGISTRY,
)
REQUEST_DURATION = Histogram(
    "q2api_request_duration_seconds",
    "Time from receiving a request to its last byte (or its error), by route.",
    ["route"],
    buckets=_DURATION_BUCKETS,
    registry=_REGISTRY,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "q2api_time_to_first_token_seconds",
    "Time from receiving a message request to its first content reaching the client, by Amazon Q model.",
    ["model"],
    buckets=_DURATION_BUCKETS,
    registry=_REGISTRY,
)
PREPARE_DURATION = Histogram(
    "q2api_prepare_seconds",
    "The gateway's own work before calling Amazon Q (parse, guards, conversion), by route.",
    ["route"],
    buckets=_DURATION_BUCKETS,
    registry=_REGISTRY,
)
UPSTREAM_HEADERS = Histogram(
    "q2api_upstream_response_headers_seconds",
    "From the first call to Amazon Q to its response headers (or its final refusal), retries included, by model.",
    ["model"],
    buckets=_DURATION_BUCKETS,
    registry=_REGISTRY,
)
UPSTREAM_FIRST_CONTENT = Histogram(
    "q2api_upstream_first_content_seconds",
    "From the first call to Amazon Q to the first content of its reply, by model.",
    ["model"],
    buckets=_DURATION_BUCKETS,
    registry=_REGISTRY,
)
UPSTREAM_ATTEMPTS = Counter(
    "q2api_upstream_attempts",
    "Calls to Amazon Q GenerateAssistantResponse, by outcome (ok, throttled, timeout, unreachable, …).",
    ["outcome"],
    registry=_REGISTRY,
)
# Host names come from the configuration or the derived lists (a handful per region): bounded labels.
UPSTREAM_HOST_ATTEMPTS = Counter(
    "q2api_upstream_host_attempts",
    "Calls to Amazon Q GenerateAssistantResponse, by host and outcome.",
    ["host", "outcome"],
    registry=_REGISTRY,
)
UPSTREAM_HOST_FAILOVERS = Counter(
    "q2api_upstream_host_failovers",
    "Requests moved from one of their account's hosts to the next (401/403/404 or unreachable).",
    ["from_host", "to_host"],
    registry=_REGISTRY,
)
UPSTREAM_HOST_SWITCHES = Counter(
    "q2api_upstream_host_switches",
    "Requests moved to their account's next host, by reason (unreachable, connect_timeout, "
    "connection_broken, or the status: 401, 403, 404, 400 for a host's profileArn is required).",
    ["reason"],
    registry=_REGISTRY,
)
UPSTREAM_SIZE_REFUSALS = Counter(
    "q2api_upstream_size_refusals",
    "Request bodies judged too large for a host: refused by Amazon Q (upstream) or answered by the gateway "
    "from the smallest body that host refused before, without a call (local).",
    ["answered_by"],
    registry=_REGISTRY,
)
UPSTREAM_MODEL_REFUSALS = Counter(
    "q2api_upstream_model_refusals",
    "INVALID_MODEL_ID for a model the account's catalogue lists: rerouted to another account, or refused.",
    ["outcome"],
    registry=_REGISTRY,
)
UPSTREAM_RETRIES = Counter(
    "q2api_upstream_retries",
    "Failed Amazon Q calls that were tried again (on the same or another account).",
    registry=_REGISTRY,
)
TOKEN_REFRESHES = Counter(
    "q2api_token_refreshes",
    "Access-token refreshes, by outcome (success, adopted from another worker, rejected, unavailable).",
    ["outcome"],
    registry=_REGISTRY,
)
ACTIVE_STREAMS = Gauge(
    "q2api_active_streams",
    "Streaming replies in progress, summed over the live workers.",
    registry=_REGISTRY,
    multiprocess_mode="livesum",
)
EVENT_LOOP_TASKS = Gauge(
    "q2api_event_loop_tasks",
    "Tasks alive on the event loop, summed over the live workers, each as of the last /metrics it answered: "
    "a figure that keeps rising while the load does not is a leak.",
    registry=_REGISTRY,
    multiprocess_mode="livesum",
)
# Seed 001 §6.3: what the conversion repaired and what the guards found, counted.
NORMALIZATIONS = Counter(
    "q2api_conversion_normalizations",
    "Changes the conversion made to a conversation's shape (merged turns, placeholders, …), by kind.",
    ["kind"],
    registry=_REGISTRY,
)
FINDINGS = Counter(
    "q2api_conversion_findings",
    "Findings of the conversion and the guards (every change, drop and problem), by kind and severity.",
    ["kind", "severity"],
    registry=_REGISTRY,
)
TOOL_LOOPS = Counter(
    "q2api_tool_loops",
    "Tool loops the loop guard found, by kind (tool_loop_cycle, tool_loop_storm) and Q2API_LOOP_MODE.",
    ["kind", "mode"],
    registry=_REGISTRY,
)
CAPTURES = Counter(
    "q2api_captures",
    "Failed (or, with Q2API_CAPTURE=all, any) requests written to a capture file, by reason.",
    ["reason"],
    registry=_REGISTRY,
)
CREDITS = Counter(
    "q2api_credits",
    "Credits Amazon Q metered for the replies served (its meteringEvent), by account and Amazon Q model.",
    ["account_id", "account", "model"],
    registry=_REGISTRY,
)
CACHE_READ_TOKENS = Counter(
    "q2api_cache_read_tokens",
    "Prompt-cache tokens Amazon Q read for the replies served (cacheReadInputTokens), by account: "
    "with session affinity a conversation's cache is read on the account that wrote it.",
    ["account_id", "account"],
    registry=_REGISTRY,
)
SESSION_TURNS = Counter(
    "q2api_session_turns",
    "Conversation turns by session affinity: kept on the account of the previous turn, moved (with the "
    "reason: disabled, resting, model, busy, failed, needs_login), or started (no pin: new or idle).",
    ["outcome", "why"],
    registry=_REGISTRY,
)
# Per client key kept in the store (`q2api keys`): the label is the key's, never the key; environment
# keys and open gateways are not counted here, so the series stay as few as the keys an operator made.
KEY_REQUESTS = Counter(
    "q2api_key_requests",
    "Requests made with each client key kept in the store, by key label and HTTP status.",
    ["key", "status"],
    registry=_REGISTRY,
)
KEY_TOKENS = Counter(
    "q2api_key_tokens",
    "Tokens of each store key's requests, by key label and direction (input, output).",
    ["key", "direction"],
    registry=_REGISTRY,
)
KEY_CREDITS = Counter(
    "q2api_key_credits",
    "Credits of each store key's requests (metered by Amazon Q, or estimated when it metered none).",
    ["key"],
    registry=_REGISTRY,
)
KEY_LIMITS_UNCHECKED = Counter(
    "q2api_key_limits_unchecked",
    "Requests of a store key whose limits could not be checked (their counters' store or Redis was down), "
    "by key label and what they got (admitted, refused: Q2API_LIMITS_WHEN_STORE_DOWN).",
    ["key", "decision"],
    registry=_REGISTRY,
)
ACCOUNT_SLOTS_UNSHARED = Counter(
    "q2api_account_slots_unshared",
    "Upstream calls whose account in-flight slot was counted in their worker alone: the fleet's count "
    "(Redis, or the store) could not be used.",
    registry=_REGISTRY,
)
KEY_USAGE_UNCOUNTED = Counter(
    "q2api_key_usage_uncounted",
    "Finished requests of a store key whose tokens and credits could not be added to its counters.",
    ["key"],
    registry=_REGISTRY,
)
USAGE_ROWS_LOST = Counter(
    "q2api_usage_rows_lost",
    "Usage ledger rows given up: refused by the database on their own, or past what may wait for a store "
    "that is down (each one also logged).",
    registry=_REGISTRY,
)
USAGE_ROWS_WAITING = Gauge(
    "q2api_usage_rows_waiting",
    "Usage ledger rows not in the database yet (in memory, or in the journal of the data directory alone), "
    "summed over the live workers.",
    registry=_REGISTRY,
    multiprocess_mode="livesum",
)
ACCOUNT_CREDITS_USED = Gauge(
    "q2api_account_credits_used",
    "Credits the account has used in its current period (Amazon Q getUsageLimits), last value seen.",
    ["account_id", "account"],
    registry=_REGISTRY,
    multiprocess_mode="mostrecent",
)
ACCOUNT_CREDITS_LIMIT = Gauge(
    "q2api_account_credits_limit",
    "The account's credit limit for its current period (Amazon Q getUsageLimits), last value seen.",
    ["account_id", "account"],
    registry=_REGISTRY,
    multiprocess_mode="mostrecent",
)


# -- recording -------------------------------------------------------------------


def observe_request(
    *,
    route: str,
    model: str,
    status: int,
    seconds: float,
    first_content_seconds: float | None = None,
    prepare_seconds: float | None = None,
    upstream_headers_seconds: float | None = None,
    upstream_first_content_seconds: float | None = None,
) -> None:
    """One answered request (called where its log line is written), with where its time went; `route`
    is its label: a door's route, another counted route's, or OTHER_ROUTE (q2api.server.doors.RouteLabels)."""
    # Labels are given by position: prometheus_client's keyword form costs ~9 µs a call, this ~2 µs.
    model = model or NO_MODEL
    REQUESTS.labels(route, model, str(status)).inc()
    REQUEST_DURATION.labels(route).observe(max(seconds, 0.0))
    if first_content_seconds is not None:
        TIME_TO_FIRST_TOKEN.labels(model).observe(max(first_content_seconds, 0.0))
    if prepare_seconds is not None:
        PREPARE_DURATION.labels(route).observe(max(prepare_seconds, 0.0))
    if upstream_headers_seconds is not None:
        UPSTREAM_HEADERS.labels(model).observe(max(upstream_headers_seconds, 0.0))
    if upstream_first_content_seconds is not None:
        UPSTREAM_FIRST_CONTENT.labels(model).observe(max(upstream_first_content_seconds, 0.0))


def count_conversion(normalizations: Mapping[str, int], findings: Iterable[tuple[str, str]]) -> None:
    """One request's conversion: its changes to the conversation by kind (the `messages normalized:`
    counts), and the (kind, severity) of every finding — one increment per kind, however many
    findings a long session's history repeats on every turn."""
    for kind, count in normalizations.items():
        NORMALIZATIONS.labels(kind).inc(count)
    for (kind, severity), count in collections.Counter(findings).items():
        FINDINGS.labels(kind, severity).inc(count)


def count_tool_loop(kind: str, mode: str) -> None:
    TOOL_LOOPS.labels(kind, mode).inc()


def count_capture(reason: str) -> None:
    CAPTURES.labels(reason).inc()


def observe_credits(*, account_id: str | None, account: str, model: str, credits: float) -> None:
    """The credits one reply was metered (called where its log line is written)."""
    CREDITS.labels(account_id=account_id or "-", account=account or "-", model=model or NO_MODEL).inc(max(credits, 0.0))


def observe_cache_reads(*, account_id: str | None, account: str, tokens: int) -> None:
    """The prompt-cache tokens one reply read (called where its log line is written)."""
    if tokens > 0:
        CACHE_READ_TOKENS.labels(account_id=account_id or "-", account=account or "-").inc(tokens)


def count_session_turn(outcome: TurnOutcome, why: str) -> None:
    SESSION_TURNS.labels(outcome, why or "-").inc()


AFFINITY_OBSERVER = AffinityObserver(turn=count_session_turn)


def observe_key_request(key: str, status: int, input_tokens: int, output_tokens: int, credits: float) -> None:
    """One request of a store key (`key`: its label), once it is over."""
    KEY_REQUESTS.labels(key, str(status)).inc()
    KEY_TOKENS.labels(key, "input").inc(max(input_tokens, 0))
    KEY_TOKENS.labels(key, "output").inc(max(output_tokens, 0))
    KEY_CREDITS.labels(key).inc(max(credits, 0.0))


class KeyLimitsObserver:
    """The tenants' gate's observer (q2api.tenants.gate.GateObserver): requests its counters could not hold."""

    def limits_unchecked(self, key_label: str, decision: str) -> None:
        KEY_LIMITS_UNCHECKED.labels(key=key_label, decision=decision).inc()

    def usage_uncounted(self, key_label: str) -> None:
        KEY_USAGE_UNCOUNTED.labels(key=key_label).inc()


KEY_LIMITS_OBSERVER = KeyLimitsObserver()


def count_unshared_slot() -> None:
    ACCOUNT_SLOTS_UNSHARED.inc()


def set_waiting_usage_rows(count: int) -> None:
    USAGE_ROWS_WAITING.set(count)


def count_lost_usage_rows(count: int) -> None:
    USAGE_ROWS_LOST.inc(count)


def stream_started() -> None:
    ACTIVE_STREAMS.inc()


def stream_finished() -> None:
    ACTIVE_STREAMS.dec()


def record_account_credits(account_id: str, label: str, *, used: float, limit: float) -> None:
    """The account's credits as last read from Amazon Q (for the code that reads getUsageLimits)."""
    ACCOUNT_CREDITS_USED.labels(account_id=account_id, account=label).set(used)
    ACCOUNT_CREDITS_LIMIT.labels(account_id=account_id, account=label).set(limit)


def _count_attempt(outcome: str) -> None:
    UPSTREAM_ATTEMPTS.labels(outcome=outcome).inc()


def _count_host_attempt(host: str, outcome: str) -> None:
    UPSTREAM_HOST_ATTEMPTS.labels(host=host, outcome=outcome).inc()


def _count_host_failover(from_host: str, to_host: str) -> None:
    UPSTREAM_HOST_FAILOVERS.labels(from_host=from_host, to_host=to_host).inc()


def _count_host_switch(reason: str) -> None:
    UPSTREAM_HOST_SWITCHES.labels(reason=reason).inc()


def _count_size_refusal(answered_by: str) -> None:
    UPSTREAM_SIZE_REFUSALS.labels(answered_by=answered_by).inc()


def _count_model_refusal(outcome: str) -> None:
    UPSTREAM_MODEL_REFUSALS.labels(outcome=outcome).inc()


def _count_retry() -> None:
    UPSTREAM_RETRIES.inc()


def _count_refresh(outcome: str) -> None:
    TOKEN_REFRESHES.labels(outcome=outcome).inc()


def _set_credits(account_id: str, label: str, used: float, limit: float) -> None:
    record_account_credits(account_id, label, used=used, limit=limit)


UPSTREAM_OBSERVER = UpstreamObserver(
    upstream_attempt=_count_attempt,
    host_attempt=_count_host_attempt,
    host_failover=_count_host_failover,
    host_switch=_count_host_switch,
    size_refusal=_count_size_refusal,
    model_refusal=_count_model_refusal,
    upstream_retry=_count_retry,
    token_refresh=_count_refresh,
    account_credits=_set_credits,
)


# -- exposition -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class AccountState:
    """One account as the answering worker's pool sees it (no secret in here)."""

    account_id: str
    label: str
    health: str  # "ready", "throttled", "quota_exhausted", "access_denied", "needs_login", …


def render(accounts: Sequence[AccountState] = ()) -> bytes:
    """The Prometheus text exposition of every q2api metric, merged across workers."""
    with contextlib.suppress(RuntimeError):  # rendered outside an event loop: there is no loop to count
        EVENT_LOOP_TASKS.set(len(asyncio.all_tasks()))
    registry = CollectorRegistry(auto_describe=False)
    directory = os.environ.get(MULTIPROC_DIR_VARIABLE)
    if directory and Path(directory).is_dir():
        _forget_dead_workers(Path(directory))
        multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Forward(_REGISTRY))
    registry.register(_AccountCollector(tuple(accounts)))
    return generate_latest(registry)


class _Forward(Collector):
    """This process's own metrics (no multiprocess directory)."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source.collect()


class _AccountCollector(Collector):
    def __init__(self, accounts: tuple[AccountState, ...]) -> None:
        self._accounts = accounts

    def collect(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily(
            "q2api_account_ready",
            "1 when the account can serve now, 0 while it rests or needs a new login.",
            labels=["account_id", "account"],
        )
        health = GaugeMetricFamily(
            "q2api_account_health",
            "The account's health: 1 on the series whose `health` label is its current state.",
            labels=["account_id", "account", "health"],
        )
        for account in self._accounts:
            ready.add_metric([account.account_id, account.label], 1.0 if account.health == "ready" else 0.0)
            health.add_metric([account.account_id, account.label, account.health], 1.0)
        yield ready
        yield health


# prometheus_client names the files of live-mode gauges `gauge_live<mode>_<pid>.db`.
_LIVE_GAUGE_FILE = re.compile(r"^gauge_live\w+?_(\d+)\.db$")


def _forget_dead_workers(directory: Path) -> None:
    """Drop the live-gauge files of worker processes that no longer exist.

    uvicorn replaces a worker that dies; the one that died never decremented its
    active streams, so its file would keep them counted forever.
    """
    for entry in directory.iterdir():
        match = _LIVE_GAUGE_FILE.match(entry.name)
        if match and not _process_exists(int(match.group(1))):
            multiprocess.mark_process_dead(int(match.group(1)), path=str(directory))  # type: ignore[no-untyped-call]


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else (a recycled pid): leave its file alone
    return True
