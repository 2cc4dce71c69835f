"""The settings table: every variable q2api reads, declared once, as a field of `Settings`.

Each field's :func:`setting` call is the whole declaration of its variable:
name, parser (which types and validates it), default, group, description,
whether it is a secret and whether `q2api serve` has a flag for it. The loader,
the flags, the typo check, `docs/configuration.md` and `.env.example` are all
derived from this table (`python -m q2api.settings --write-docs`).

Descriptions are Markdown, one paragraph, written for the operator who reads
the reference; `.env.example` carries them as comments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from q2api.conversion.loop_guard import LoopMode
from q2api.conversion.trimming import TrimMode
from q2api.settings.declaration import Group, Variable, declared_variables, setting
from q2api.settings.parsers import (
    Choice,
    CommaList,
    DatabaseUrl,
    Directory,
    EnumChoice,
    FernetKeys,
    Flag,
    HostList,
    HostOverride,
    ModelMap,
    Number,
    OptionalDirectory,
    ProxyUrl,
    RedisPrefix,
    RedisUrl,
    Text,
    Url,
    mask_redis_url,
)
from q2api.store.database_url import mask_database_url

AuthMethod = Literal["idc", "social", "api_key"]
AuthMethodSetting = Literal["auto", "idc", "social"]
LogFormat = Literal["text", "json"]
LogLevel = Literal["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"]
UnknownModel = Literal["family", "reject", "default"]
PromptCache = Literal["auto", "off"]
LimitsWhenStoreDown = Literal["admit", "refuse"]

DEFAULT_ENDPOINT = "https://q.us-east-1.amazonaws.com/"
DEFAULT_OIDC_ENDPOINT = "https://oidc.us-east-1.amazonaws.com"
DEFAULT_KIRO_REFRESH_ENDPOINT = "https://prod.us-east-1.auth.desktop.kiro.dev/refreshToken"
LOG_LEVELS: tuple[LogLevel, ...] = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")


class CaptureMode(StrEnum):
    """`Q2API_CAPTURE`: which requests are written to a capture file (q2api.server.captures)."""

    FAILURES = "failures"  # an upstream 4xx other than the account's own and a context overflow, or a guard finding
    OFF = "off"
    ALL = "all"  # every request that reached the conversion (costs memory and disk: for debugging)


SECONDS = "SECONDS"  # the metavar of a `serve` flag that takes seconds
COUNT = "N"


def _count_keys(keys: tuple[str, ...]) -> str:
    return f"<{len(keys)} keys>"


def _masked_url(url: str | None) -> str:
    return repr(url and mask_database_url(url))


def _masked_redis_url(url: str | None) -> str:
    return repr(url and mask_redis_url(url))


def _mapping(value: Mapping[str, str]) -> str:
    return repr(dict(value))


@dataclasses.dataclass(frozen=True, repr=False)
class Settings:
    # -- client access ------------------------------------------------------------------
    api_keys: tuple[str, ...] = setting(
        "Q2API_API_KEYS",
        CommaList(),
        default=(),
        group=Group.CLIENT_ACCESS,
        secret=True,
        shown_as=_count_keys,
        description="""
            Client keys, comma-separated, accepted as `x-api-key` or `Authorization: Bearer`, beside
            the keys kept in the store (`q2api keys create`). Empty, with no key in the store either
            = no client auth (only loopback names and `Q2API_ALLOWED_HOSTS` are answered), and a
            warning at start-up says so.""",
    )
    redis_url: str | None = setting(
        "Q2API_REDIS_URL",
        RedisUrl(),
        default=None,
        group=Group.CLIENT_ACCESS,
        secret=True,  # it may hold a password: shown with the password masked
        shown_as=_masked_redis_url,
        description="""
            Where the limits of the client keys kept in the store (`q2api keys`), the accounts'
            in-flight slots, their hosts' rests and the session affinity pins are kept, shared by every
            worker and replica:
            `redis://host:6379/0` (`rediss://` with TLS). Empty = in the store itself (SQLite, or the
            shared database). See [Keys and usage](keys-and-usage.md#limits),
            [Deployment](deployment.md#shared-limits) and [Accounts](accounts.md#session-affinity).""",
    )
    limits_when_store_down: LimitsWhenStoreDown = setting(
        "Q2API_LIMITS_WHEN_STORE_DOWN",
        Choice[LimitsWhenStoreDown](("admit", "refuse")),
        default="admit",
        group=Group.CLIENT_ACCESS,
        description="""
            What a request of a store key gets while the counters of its limits (rates, tokens,
            concurrency, budgets) cannot be read, in Redis or the store: `admit` (served without
            them; a WARNING once a minute while it lasts, and `q2api_key_limits_unchecked_total` in
            `/metrics`) or `refuse` (503 with `retry-after`). A key's models, expiry and revocation
            are never skipped: a request whose key cannot be read at all gets 503. See
            [Keys and usage](keys-and-usage.md#when-the-store-is-down).""",
    )
    redis_prefix: str = setting(
        "Q2API_REDIS_PREFIX",
        RedisPrefix(),
        default="q2api",
        group=Group.CLIENT_ACCESS,
        description="""
            The start of every Redis key q2api writes (`PREFIX:tenants:…`, `PREFIX:pins:…`), so that
            deployments sharing one Redis database keep their counters and session pins apart.""",
    )
    allowed_hosts: tuple[str, ...] = setting(
        "Q2API_ALLOWED_HOSTS",
        HostList(),
        default=(),
        group=Group.CLIENT_ACCESS,
        description="""
            Without client keys, the `Host` names the API answers besides loopback ones
            (`localhost`, `127.0.0.1`, `[::1]`, any port): comma-separated names or addresses
            without port (`gateway.lan,10.0.0.5`), `*.example.com` for every name below it, `*`
            for any. Other names get 403, so that a web page cannot reach a keyless gateway by
            pointing its own domain at it (DNS rebinding). Ignored when client keys are set.""",
    )
    # -- the account from the environment ----------------------------------------------
    refresh_token: str | None = setting(
        "AMAZONQ_REFRESH_TOKEN",
        Text(),
        default=None,
        group=Group.ACCOUNT,
        secret=True,
        description="Refresh token of the account configured in the environment; it seeds the store.",
    )
    client_id: str | None = setting(
        "AMAZONQ_CLIENT_ID",
        Text(),
        default=None,
        group=Group.ACCOUNT,
        description="""
            OIDC client id of that account's client registration (IAM Identity Center / Builder ID
            logins only); set together with `AMAZONQ_CLIENT_SECRET` or not at all. With both set the
            account refreshes through `AMAZONQ_OIDC_ENDPOINT`, without them through Kiro's
            social-login endpoint.""",
    )
    client_secret: str | None = setting(
        "AMAZONQ_CLIENT_SECRET",
        Text(),
        default=None,
        group=Group.ACCOUNT,
        secret=True,
        description="OIDC client secret of that client registration; set together with `AMAZONQ_CLIENT_ID`.",
    )
    access_token: str | None = setting(
        "AMAZONQ_ACCESS_TOKEN",
        Text(),
        default=None,
        group=Group.ACCOUNT,
        secret=True,
        description="Optional current access token, used until it expires or is rejected.",
    )
    amazonq_api_key: str | None = setting(
        "AMAZONQ_API_KEY",
        Text(),
        default=None,
        group=Group.ACCOUNT,
        secret=True,
        description="""
            A Kiro API key (`ksk_…`, made at app.kiro.dev) as the environment account, instead of a
            login: sent as the bearer with `tokentype: API_KEY`, never refreshed. Not together with
            `AMAZONQ_REFRESH_TOKEN`. See [Accounts](accounts.md#kiro-api-keys).""",
    )
    proxy_url: str | None = setting(
        "AMAZONQ_PROXY",
        ProxyUrl(),
        default=None,
        group=Group.ACCOUNT,
        secret=True,
        description="""
            The environment account's own proxy, `http://host:port` or `socks5://user:password@host:port`
            (also `https://`, `socks4://`): every call of that account (chat, refresh, catalogue,
            credits) goes through it; other accounts are not affected. Its credentials are secrets.""",
    )
    profile_arn: str | None = setting(
        "AMAZONQ_PROFILE_ARN",
        Text(),
        default=None,
        group=Group.ACCOUNT,
        description="Optional `profileArn` sent upstream (Kiro social logins get it from the refresh reply).",
    )
    auth_method_setting: AuthMethodSetting = setting(
        "AMAZONQ_AUTH_METHOD",
        Choice[AuthMethodSetting](("auto", "idc", "social")),
        default="auto",
        group=Group.ACCOUNT,
        deprecated=(
            "the method follows from the client registration (IdC when AMAZONQ_CLIENT_ID and "
            "AMAZONQ_CLIENT_SECRET are set, else Kiro social), as auto does: remove the variable"
        ),
        description="""
            `auto`, `idc` or `social`; `auto` = `idc` when the client id and secret are set, else
            `social`. Any other value than `auto` either agrees with it or cannot work (an IdC token
            is refreshed with its client registration; a social one ignores it).""",
    )
    # -- Amazon Q endpoints and retries --------------------------------------------------
    endpoint: str = setting(
        "AMAZONQ_ENDPOINT",
        HostOverride(),
        default="",
        group=Group.UPSTREAM,
        description="""
            Where `GenerateAssistantResponse` calls go. Empty (the default): each account's ordered
            hosts follow from its login kind and region — social logins
            `runtime.<region>.kiro.dev`, then `q.<region>.amazonaws.com`, then (us-east-1)
            `codewhisperer.us-east-1.amazonaws.com`; IdC / Builder ID logins `q.<region>` first and
            `runtime.<region>` last; API keys `q.<region>` then `runtime.<region>`. A host that
            answers 401/403/404 or cannot be reached rests for that account (1 minute, doubling
            up to 30) and the request moves to the next one. One URL (e.g.
            `https://q.eu-central-1.amazonaws.com/`) or a comma-separated ordered list overrides
            the list for every account; `runtime=https://…` names the kind of a host whose name
            does not say it.""",
    )
    oidc_endpoint: str = setting(
        "AMAZONQ_OIDC_ENDPOINT",
        Url(),
        default=DEFAULT_OIDC_ENDPOINT,
        group=Group.UPSTREAM,
        description="AWS SSO OIDC base URL; IdC / Builder ID tokens are refreshed with `POST {base}/token`.",
    )
    kiro_refresh_endpoint: str = setting(
        "AMAZONQ_KIRO_REFRESH_ENDPOINT",
        Url(),
        default=DEFAULT_KIRO_REFRESH_ENDPOINT,
        group=Group.UPSTREAM,
        description="Where Kiro social-login tokens are refreshed.",
    )
    max_retries: int = setting(
        "Q2API_MAX_RETRIES",
        Number(int, 0),
        default=3,
        group=Group.UPSTREAM,
        description="""
            Retries after the first attempt (connection errors, 5xx, throttling, overload), only
            before any byte reached the client.""",
    )
    account_max_failures: int = setting(
        "Q2API_ACCOUNT_MAX_FAILURES",
        Number(int, 0),
        default=10,
        group=Group.UPSTREAM,
        description="""
            Consecutive upstream failures (5xx, unreachable, refresh failures; not the client's own
            bad requests) after which an account rests for 5 minutes; `0` = never.""",
    )
    account_max_inflight: int = setting(
        "Q2API_ACCOUNT_MAX_INFLIGHT",
        Number(int, 1),
        default=8,
        group=Group.UPSTREAM,
        description="""
            Requests one account may have in flight at once (peers report 5–8 as what Amazon Q
            tolerates). A request that finds every eligible account full waits up to
            `Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS` for a slot on the least busy one, then gets the
            door's overloaded error (Claude 529, OpenAI 503) with `retry-after`. Counted across every
            worker and replica (in Redis when `Q2API_REDIS_URL` is set, else in the store); the slots of
            a worker that died are free again within seconds. While that count cannot be used, each
            worker counts its own (a WARNING once a minute). See
            [Deployment](deployment.md#shared-limits).""",
    )
    account_inflight_wait_seconds: float = setting(
        "Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS",
        Number(float, 0, unit="seconds"),
        default=10.0,
        group=Group.UPSTREAM,
        description="How long a request waits for a free in-flight slot before the overloaded error.",
    )
    session_affinity_seconds: int = setting(
        "Q2API_SESSION_AFFINITY_SECONDS",
        Number(int, 0, unit="seconds"),
        default=3600,
        group=Group.UPSTREAM,
        description="""
            How long an idle conversation stays pinned to the account that served its last turn (its
            thinking signatures and prompt cache live there). The pin is shared by every worker and
            replica: in Redis when `Q2API_REDIS_URL` is set, else in the store. 0 = no affinity: each
            turn goes to the least busy account. See [Accounts](accounts.md#session-affinity).""",
    )
    # -- account store -------------------------------------------------------------------
    data_dir: Path = setting(
        "Q2API_DATA_DIR",
        Directory(),
        default=Path("data"),
        group=Group.STORE,
        description="""
            Where the SQLite account store lives (directory created 0700, files 0600), relative to
            the working directory.""",
    )
    database_url: str | None = setting(
        "Q2API_DATABASE_URL",
        DatabaseUrl(),
        default=None,
        group=Group.STORE,
        secret=True,  # it may hold a password: shown with the password masked
        shown_as=_masked_url,
        description="""
            Empty = the SQLite store in `Q2API_DATA_DIR`. `postgresql://user:password@host:5432/db`
            or `mysql://…` (MariaDB too) = a store shared by several replicas; it needs
            `Q2API_SECRET_KEY`.""",
    )
    secret_key: str | None = setting(
        "Q2API_SECRET_KEY",
        FernetKeys(),
        default=None,
        group=Group.STORE,
        secret=True,
        description="""
            Fernet key encrypting refresh tokens, access tokens and client secrets in a shared store;
            required with `Q2API_DATABASE_URL`. Several keys, comma-separated, rotate keys: the first
            encrypts, all decrypt. Make one with
            `python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.""",
    )
    responses_ttl_seconds: int = setting(
        "Q2API_RESPONSES_TTL_SECONDS",
        Number(int, 1, unit="seconds"),
        default=30 * 24 * 3600,
        group=Group.STORE,
        description="""
            Seconds a response of the OpenAI Responses API (`POST /v1/responses`) is kept in the store
            for `previous_response_id` and `GET /v1/responses/{id}` (30 days); a request with
            `store: false` is never kept. See [Clients](clients.md#openai-responses-api).""",
    )
    usage_retention_days: int = setting(
        "Q2API_USAGE_RETENTION_DAYS",
        Number(int, 1, unit="days"),
        default=90,
        group=Group.STORE,
        description="""
            Days the usage ledger keeps one row per request; older rows are folded into daily sums
            per key, model, account and door, which `q2api usage` and the console still count. See
            [Keys and usage](keys-and-usage.md#the-usage-ledger).""",
    )
    # -- conversion and guards -----------------------------------------------------------
    max_body_bytes: int = setting(
        "Q2API_MAX_BODY_BYTES",
        Number(int, 1024, unit="bytes"),
        default=32 * 1024 * 1024,
        group=Group.CONVERSION,
        description="Largest accepted request body (32 MiB); larger ones get 413.",
    )
    max_reply_bytes: int = setting(
        "Q2API_MAX_REPLY_BYTES",
        Number(int, 1024, unit="bytes"),
        default=8 * 1024 * 1024,
        group=Group.CONVERSION,
        description="""
            Largest reply the gateway relays, in UTF-8 bytes of text, thinking and tool input (8 MiB),
            beside the request's `max_tokens`: repetitive text costs few tokens, and a reply of
            hundreds of MB within its token budget was held whole. A reply that reaches it ends
            there with `stop_reason: max_tokens` (`finish_reason: length`, `incomplete`), streamed
            or not, as a reply cut by its token budget does; a tool call whose input passes it is
            withheld.
        """,
    )
    upstream_max_request_bytes: int = setting(
        "Q2API_UPSTREAM_MAX_REQUEST_BYTES",
        Number(int, 1024, unit="bytes"),
        default=6_340_000,
        group=Group.CONVERSION,
        description="""
            Largest Amazon Q request the gateway sends (the converted conversation, encoded). A
            larger one is answered 400 `prompt is too long: …` naming its size and this limit, so
            Claude Code compacts the conversation instead of meeting an opaque upstream failure.
            The default is the largest body peers saw Amazon Q accept (6.34 MB; 7.34 MB failed).""",
    )
    loop_mode: LoopMode = setting(
        "Q2API_LOOP_MODE",
        EnumChoice(LoopMode),
        default=LoopMode.WARN,
        group=Group.CONVERSION,
        description="""
            What the tool loop guard does about a loop: `warn` (log a `tool loop suspected:`
            WARNING), `block` (log it, then refuse the request with a 400 that names the loop and
            the way out) or `off`. A round is the tool calls of one assistant turn.""",
    )
    loop_threshold: int = setting(
        "Q2API_LOOP_THRESHOLD",
        Number(int, 2),
        default=3,
        group=Group.CONVERSION,
        description="""
            How many times the same tool round, or the same cycle of up to 5 rounds (same calls,
            same inputs, same results), must repeat at the end of the conversation to count as a
            loop.""",
    )
    loop_storm_threshold: int = setting(
        "Q2API_LOOP_STORM_THRESHOLD",
        Number(int, 3),
        default=8,
        group=Group.CONVERSION,
        description="Calls of one tool in a row, each with a different input and each failing, that count as a storm.",
    )
    trim_history: TrimMode = setting(
        "Q2API_TRIM_HISTORY",
        EnumChoice(TrimMode),
        default=TrimMode.OFF,
        group=Group.CONVERSION,
        description="""
            `oldest`: a request over Amazon Q's limits (198 history messages, 1,200,000 bytes of body)
            loses its oldest whole rounds — an assistant turn with the user turn answering it — until it
            fits, keeping the system prompt, the first user message and the last round, with a marker
            turn saying what was left out; `off`: never. For clients that cannot compact (Claude Code
            compacts when it gets `prompt is too long`). See
            [Operating](operating.md#history-trimming).""",
    )
    prompt_cache: PromptCache = setting(
        "Q2API_PROMPT_CACHE",
        Choice[PromptCache](("auto", "off")),
        default="auto",
        group=Group.CONVERSION,
        description="""
            Prompt caching: `auto` turns a request's `cache_control` breakpoints (at most 4) into
            Amazon Q `cachePoint`s for models whose catalogue says they take them
            (`supportsPromptCache`); `off` sends none. Either way the cache figures a reply reports
            are only Amazon Q's own, never an estimate. See
            [Clients](clients.md#prompt-caching).""",
    )
    # -- streaming and timeouts ----------------------------------------------------------
    ping_interval: float = setting(
        "Q2API_PING_INTERVAL",
        Number(float, 0, above=True, unit="seconds"),
        default=10.0,
        group=Group.STREAMING,
        description="Seconds between SSE `ping` events while Amazon Q is silent.",
    )
    stream_hold_seconds: float = setting(
        "Q2API_STREAM_HOLD_SECONDS",
        Number(float, 0, unit="seconds"),
        default=5.0,
        group=Group.STREAMING,
        description="""
            Seconds a stream waits for its first content before sending anything, so that an
            upstream failure arriving first is still an HTTP status the SDKs retry (`0` = off).""",
    )
    send_timeout: float = setting(
        "Q2API_SEND_TIMEOUT",
        Number(float, 0, above=True, unit="seconds"),
        default=60.0,
        group=Group.STREAMING,
        description="""
            Seconds a streaming write may wait for a client that has stopped reading; then the
            request ends (logged `error=client_stalled`) and its Amazon Q reply is closed.""",
    )
    connect_timeout: float = setting(
        "Q2API_CONNECT_TIMEOUT",
        Number(float, 0, above=True, unit="seconds"),
        default=10.0,
        group=Group.STREAMING,
        deprecated=(
            "the connect timeout becomes a fixed 10 seconds (a connection to Amazon Q opens in well under a "
            "second or not at all; Q2API_MAX_RETRIES is the setting for an unreachable host): remove the variable"
        ),
        description="Seconds to open a connection to Amazon Q.",
    )
    first_byte_timeout: float = setting(
        "Q2API_FIRST_BYTE_TIMEOUT",
        Number(float, 0, above=True, unit="seconds"),
        default=120.0,
        group=Group.STREAMING,
        description="Seconds to wait for Amazon Q's response headers.",
    )
    read_timeout: float = setting(
        "Q2API_READ_TIMEOUT",
        Number(float, 0, above=True, unit="seconds"),
        default=300.0,
        group=Group.STREAMING,
        description="Seconds Amazon Q may stay silent between two parts of a reply.",
    )
    upstream_keepalive_seconds: float = setting(
        "Q2API_UPSTREAM_KEEPALIVE_SECONDS",
        Number(float, 0, above=True, unit="seconds"),
        default=300.0,
        group=Group.STREAMING,
        description="""
            How long an idle connection to Amazon Q is kept for the next request. Amazon Q drops
            silent connections after 200–400 s and a new TLS handshake costs a few hundred
            milliseconds, so a user's next turn minutes later reuses the connection of the last
            one; at least 180 is advised.""",
    )
    # -- transport limits (per worker) ---------------------------------------------------
    max_header_bytes: int = setting(
        "Q2API_MAX_HEADER_BYTES",
        Number(int, 1024, unit="bytes"),
        default=64 * 1024,
        group=Group.TRANSPORT,
        flag_metavar=COUNT,
        description="Largest request line + headers; more is refused with 431.",
    )
    max_headers: int = setting(
        "Q2API_MAX_HEADERS",
        Number(int, 8),
        default=100,
        group=Group.TRANSPORT,
        flag_metavar=COUNT,
        description="Most request headers; more is refused with 431.",
    )
    header_timeout: float = setting(
        "Q2API_HEADER_TIMEOUT",
        Number(float, 0, above=True, unit="seconds"),
        default=10.0,
        group=Group.TRANSPORT,
        flag_metavar=SECONDS,
        description="""
            Seconds a client has to send a request's headers (from connecting, or from the request's
            first byte); then 408, or a plain close if it sent nothing.""",
    )
    body_timeout: float = setting(
        "Q2API_BODY_TIMEOUT",
        Number(float, 0, above=True, unit="seconds"),
        default=60.0,
        group=Group.TRANSPORT,
        flag_metavar=SECONDS,
        description="""
            Seconds a client has to send the whole body once its headers are in (a short or
            unterminated body included); then 408.""",
    )
    keep_alive_timeout: int = setting(
        "Q2API_KEEP_ALIVE_TIMEOUT",
        Number(int, 1, unit="seconds"),
        default=75,
        group=Group.TRANSPORT,
        flag_metavar=SECONDS,
        description="""
            Seconds an idle kept-alive connection stays open between two requests: longer than the
            clients' own idle expiry (5 s in httpx, which the Python SDKs use; 4 s in Node's undici),
            so that the client closes first — a server closing a connection just as the client
            reuses it fails that request. Behind a load balancer, make it longer than the
            balancer's own idle timeout.""",
    )
    max_connections: int = setting(
        "Q2API_MAX_CONNECTIONS",
        Number(int, 0),
        default=0,
        group=Group.TRANSPORT,
        flag_metavar=COUNT,
        description="""
            Most open client connections, and requests in progress, per worker (0: half the
            open-file limit, less 64). Beyond it, 503. With 0, the figure follows the worker's
            open-file limit, which `q2api serve` first raises to its hard limit: a stream holds two
            sockets (client and Amazon Q), and 64 files are kept for the rest, so `ulimit -n` 1024
            gives 480 and 65536 gives 32736. Start-up logs the figure.""",
    )
    # -- models and credits ---------------------------------------------------------------
    model_map: Mapping[str, str] = setting(
        "Q2API_MODEL_MAP",
        ModelMap(),
        default=MappingProxyType({}),
        group=Group.MODELS,
        shown_as=_mapping,
        description="Extra model mappings: `claude-name=amazon-q-model-id,…`.",
    )
    unknown_model: UnknownModel = setting(
        "Q2API_UNKNOWN_MODEL",
        Choice[UnknownModel](("family", "reject", "default")),
        default="family",
        group=Group.MODELS,
        description="""
            How a Claude model id the live catalogue lacks is served: `family` (the newest model of
            the same family, logged and named in the `x-q2api-upstream-model` response header; an id
            of no known family gets 404), `reject` (404) or `default` (`Q2API_DEFAULT_MODEL`).""",
    )
    default_model: str | None = setting(
        "Q2API_DEFAULT_MODEL",
        Text(),
        default=None,
        group=Group.MODELS,
        description="""
            Amazon Q model for `Q2API_UNKNOWN_MODEL=default` (empty = the catalogue's default, else
            `claude-sonnet-4.5`).""",
    )
    model_discovery: bool = setting(
        "Q2API_MODEL_DISCOVERY",
        Flag(),
        default=True,
        group=Group.MODELS,
        description="""
            Ask Amazon Q for each account's models (`ListAvailableModels`) and credits
            (`getUsageLimits`); `false` = the built-in model table and no credits.""",
    )
    models_refresh_seconds: float = setting(
        "Q2API_MODELS_REFRESH_SECONDS",
        Number(float, 0, unit="seconds"),
        default=3600.0,
        group=Group.MODELS,
        deprecated=(
            "the catalogues are read every hour, and again when a request names a model none has "
            "(Q2API_MODEL_DISCOVERY=false turns the reads off): remove the variable"
        ),
        description="Seconds between reads of each account's model catalogue (`0` = start-up and on demand only).",
    )
    credits_refresh_seconds: float = setting(
        "Q2API_CREDITS_REFRESH_SECONDS",
        Number(float, 0, unit="seconds"),
        default=300.0,
        group=Group.MODELS,
        description="""
            Seconds each account's credits (`getUsageLimits`) are cached and read again (`0` =
            start-up only).""",
    )
    # -- logging and debugging --------------------------------------------------------------
    log_level: LogLevel = setting(
        "Q2API_LOG_LEVEL",
        Choice[LogLevel](LOG_LEVELS, upper=True),
        default="INFO",
        group=Group.LOGGING,
        description="The least severe level written to stderr (`DEBUG` for more, `WARNING` for less).",
    )
    log_format: LogFormat = setting(
        "Q2API_LOG_FORMAT",
        Choice[LogFormat](("text", "json")),
        default="text",
        group=Group.LOGGING,
        description="""
            `text`, or `json`: one flat JSON object per line (`time`, `level`, `message`, `logger`,
            then the line's fields at the top level), as log tools index it.""",
    )
    debug_message_conversion: bool = setting(
        "DEBUG_MESSAGE_CONVERSION",
        Flag(),
        default=False,
        group=Group.LOGGING,
        description="""
            `true` logs a summary of every Claude → Amazon Q conversion (the
            `=== Message Conversion Debug ===` block) with the repairs and guard findings under it. See
            [Troubleshooting](troubleshooting.md#the-debug-summary).""",
    )
    capture: CaptureMode = setting(
        "Q2API_CAPTURE",
        EnumChoice(CaptureMode),
        default=CaptureMode.FAILURES,
        group=Group.LOGGING,
        description="""
            Which requests are written to a capture file, to inspect, attach to a bug report and run
            again with `q2api replay`: `failures` (Amazon Q refused the request as malformed — a 4xx
            other than the account's own and other than a context overflow — or the loop or order
            guard found something), `all` (every request; for a debugging session) or `off`. Captures
            hold no secret and no image or document data. See [Captures](operating.md#captures).""",
    )
    capture_dir_setting: Path | None = setting(
        "Q2API_CAPTURE_DIR",
        OptionalDirectory(),
        default=None,
        group=Group.LOGGING,
        description="""
            Where capture files go (directory 0700, files 0600; at most 100 files and 100 MiB, the
            oldest dropped first). Empty = `captures` inside `Q2API_DATA_DIR`.""",
    )
    capture_redact_text: bool = setting(
        "Q2API_CAPTURE_REDACT_TEXT",
        Flag(),
        default=False,
        group=Group.LOGGING,
        description="""
            `true` also replaces every message, tool-result, system and tool-input text in captures by
            filler of the same shape (letters by letters, digits by digits, punctuation and tags kept),
            so a capture shows the failure without the user's text or code.""",
    )
    # -- admin API and console -----------------------------------------------------------------
    admin_key: str | None = setting(
        "Q2API_ADMIN_KEY",
        Text(),
        default=None,
        group=Group.ADMIN,
        secret=True,
        description="""
            Enables the admin API (`/admin/api/…`, sent as `Authorization: Bearer <key>`) and the
            web console (`/console`, signed in with this key); must differ from every client key.
            Empty = every admin path is a 404.""",
    )

    @property
    def auth_method(self) -> AuthMethod:
        """`auto` resolves to IdC when the OIDC client registration is present, else Kiro social."""
        if self.amazonq_api_key:
            return "api_key"
        if self.auth_method_setting != "auto":
            return self.auth_method_setting
        return "idc" if self.client_id and self.client_secret else "social"

    @property
    def capture_dir(self) -> Path:
        """Where capture files go: `Q2API_CAPTURE_DIR`, else `captures` inside the data directory."""
        return self.capture_dir_setting or self.data_dir / "captures"

    @property
    def has_env_account(self) -> bool:
        """True when the environment configures an account (a refresh or an access token, or a Kiro API key)."""
        return bool(self.refresh_token or self.access_token or self.amazonq_api_key)

    def __repr__(self) -> str:
        shown = (f"{variable.field}={variable.shown(getattr(self, variable.field))}" for variable in VARIABLES)
        return f"Settings({', '.join(shown)})"

    __str__ = __repr__


# Every variable, in the table's order, each knowing its field.
VARIABLES: tuple[Variable[Any], ...] = declared_variables(Settings)
