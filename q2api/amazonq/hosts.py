"""Which Amazon Q hosts an account's requests go to, in which order, and what each host accepts.

Pure: plain values in (an auth kind, a region, the operator's override), plain values out. The facts
are docs/protocol.md#hosts, with their sources (peers' trackers, tagged A8–A10 below):

* AWS announced `q.<region>.amazonaws.com` would be replaced by `runtime.<region>.kiro.dev`
  (regions us-east-1 and eu-central-1), but every 2026 peer still reaches the legacy host, and the
  runtime host accepts fewer token kinds (A8.1, A8.3).
* `runtime.<r>.kiro.dev` serves social (Kiro desktop) logins with their `profileArn`; it refuses
  IdC / Builder ID tokens (403 or 400) and API keys, requires a `profileArn` (400 without), and
  rejects the legacy body fields with 400 `REQUEST_BODY_INVALID` (A8.3, A8.4).
* `q.<r>.amazonaws.com` serves every kind (social, IdC, Builder ID without ARN, API keys) (A8.3).
* `codewhisperer.us-east-1.amazonaws.com` exists in us-east-1 only; it serves social and IdC
  tokens but answers API keys 400 `REQUEST_BODY_INVALID` (A8.1, A8.3, A10).

The order chosen per kind (A8.5 for what peers do; where the sources disagree this says which way):

* social: runtime first (OR PR #11517, JW), then q, then codewhisperer (us-east-1): the announced home
  first, the hosts every peer still reaches after it.
* IdC / Builder ID: q first (✓ for both), codewhisperer (us-east-1), runtime last — ⚠ some peers
  report the runtime host accepting a real enterprise ARN, so it stays as the last resort; an account
  without a profile never goes there (the host requires one).
* API key: q first, runtime last (⚠ only NR and OR report runtime refusing keys, A10);
  codewhisperer never (it authenticates keys and then refuses the body).

`AMAZONQ_ENDPOINT` overrides the derived list for every account: one URL or a comma-separated ordered
list. A host's kind (and so its body rules) follows from its name; a URL whose name says nothing (a
test server on loopback, a private relay) may say it with a prefix: `runtime=https://10.0.0.5/`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from urllib.parse import urlsplit

US_EAST_1 = "us-east-1"
EU_CENTRAL_1 = "eu-central-1"
API_REGIONS = (US_EAST_1, EU_CENTRAL_1)


class AuthKind(enum.StrEnum):
    """How an account proves who it is, as far as the hosts care."""

    SOCIAL = "social"  # Kiro desktop login (Google, GitHub): the refresh reply carries its profileArn
    IDC = "idc"  # AWS SSO OIDC: IAM Identity Center or Builder ID
    API_KEY = "api_key"  # a Kiro API key (`ksk_…`), sent as the bearer with `tokentype: API_KEY`


class HostKind(enum.StrEnum):
    RUNTIME = "runtime"  # runtime.<r>.kiro.dev
    Q = "q"  # q.<r>.amazonaws.com (the legacy host)
    CODEWHISPERER = "codewhisperer"  # codewhisperer.us-east-1.amazonaws.com
    OTHER = "other"  # a name that says nothing: sent the legacy host's way


# Top-level and conversationState fields the runtime host refuses with 400 REQUEST_BODY_INVALID (A8.4).
LEGACY_TOP_LEVEL_FIELDS = ("agentMode", "systemPrompt")
LEGACY_STATE_FIELDS = ("agentContinuationId", "agentTaskType")


@dataclasses.dataclass(frozen=True, slots=True)
class Host:
    """One inference host: its URL (what a request is POSTed to) and its kind (what it accepts)."""

    url: str
    kind: HostKind

    @property
    def name(self) -> str:
        """`runtime.us-east-1.kiro.dev` (with a port when the URL has one): what logs and metrics say."""
        return urlsplit(self.url).netloc or self.url

    @property
    def requires_profile(self) -> bool:
        """A request without `profileArn` is refused (400 "profileArn is required")."""
        return self.kind is HostKind.RUNTIME

    @property
    def refuses_legacy_fields(self) -> bool:
        return self.kind is HostKind.RUNTIME


def api_region(region: str | None) -> str:
    """The API region an account's requests go to: us-east-1 or eu-central-1.

    SSO regions map to API regions as Kiro's own clients map them (A8.1, PPK `API_REGION_MAP`):
    every `eu-*` region → eu-central-1, everything else (us-*, ap-*, …, none) → us-east-1.
    """
    value = (region or "").strip().lower()
    return EU_CENTRAL_1 if value.startswith("eu-") else US_EAST_1


def host_kind(url: str) -> HostKind:
    """What a URL's host name says about the host."""
    name = (urlsplit(url).hostname or "").lower()
    if name.startswith("runtime.") and name.endswith(".kiro.dev"):
        return HostKind.RUNTIME
    if name.startswith("q.") and name.endswith(".amazonaws.com"):
        return HostKind.Q
    if name.startswith("codewhisperer.") and name.endswith(".amazonaws.com"):
        return HostKind.CODEWHISPERER
    return HostKind.OTHER


def runtime_url(region: str) -> str:
    return f"https://runtime.{region}.kiro.dev/"


def q_url(region: str) -> str:
    return f"https://q.{region}.amazonaws.com/"


def management_url(region: str | None) -> str:
    """Where configuration calls (ListAvailableProfiles) live from 2026 on (A8.1, A9)."""
    return f"https://management.{api_region(region)}.kiro.dev/"


CODEWHISPERER_URL = "https://codewhisperer.us-east-1.amazonaws.com/"


def parse_override(raw: str | Sequence[str]) -> tuple[Host, ...]:
    """`AMAZONQ_ENDPOINT`: `https://a/`, `https://a/,https://b/` or `runtime=https://10.0.0.5/, q=…`.

    Raises ValueError naming the entry that is neither a URL nor `kind=URL`.
    """
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    hosts: list[Host] = []
    for item in (entry.strip() for entry in items):
        if not item:
            continue
        kind_word, separator, url = item.partition("=")
        if separator and not kind_word.startswith(("http://", "https://")):
            try:
                kind = HostKind(kind_word.strip().lower())
            except ValueError:
                words = ", ".join(member.value for member in HostKind)
                raise ValueError(f"unknown host kind {kind_word!r} in {item!r} (one of {words})") from None
            url = url.strip()
        else:
            url, kind = item, host_kind(item)
        if not url.startswith(("http://", "https://")) or not urlsplit(url).netloc:
            raise ValueError(f"{item!r} is not an http:// or https:// URL")
        hosts.append(Host(url, kind))
    return tuple(dict.fromkeys(hosts))  # a host listed twice is tried once


def write_override(hosts: Sequence[Host]) -> str:
    """The inverse of `parse_override` (the kind is written only where the name does not say it)."""
    return ",".join(host.url if host_kind(host.url) is host.kind else f"{host.kind.value}={host.url}" for host in hosts)


def inference_hosts(auth_kind: str, region: str | None, override: Sequence[Host] = ()) -> tuple[Host, ...]:
    """The ordered hosts an account of `auth_kind` ("social", "idc", "api_key") in `region` tries.

    `override` (the parsed `AMAZONQ_ENDPOINT`), when given, is every account's list as it stands. An
    unknown kind is treated as IdC (q first): the host that accepts every token kind.
    """
    if override:
        return tuple(override)
    region = api_region(region)
    runtime = Host(runtime_url(region), HostKind.RUNTIME)
    legacy = Host(q_url(region), HostKind.Q)
    codewhisperer = (Host(CODEWHISPERER_URL, HostKind.CODEWHISPERER),) if region == US_EAST_1 else ()
    if auth_kind == AuthKind.SOCIAL:
        return (runtime, legacy, *codewhisperer)
    if auth_kind == AuthKind.API_KEY:
        return (legacy, runtime)
    return (legacy, *codewhisperer, runtime)


def usable_hosts(
    auth_kind: str, region: str | None, has_profile: bool, override: Sequence[Host] = ()
) -> tuple[Host, ...]:
    """The hosts an account's calls may go to, in their order (those it may not be sent to left out)."""
    return tuple(
        host for host in inference_hosts(auth_kind, region, override) if accepts_account(host, auth_kind, has_profile)
    )


def first_host(auth_kind: str, region: str | None, has_profile: bool, override: Sequence[Host] = ()) -> Host:
    """Where an account's calls go when nothing has failed yet (for one-off calls outside the gateway)."""
    hosts = inference_hosts(auth_kind, region, override)
    return next((host for host in hosts if accepts_account(host, auth_kind, has_profile)), hosts[0])


def accepts_account(host: Host, auth_kind: str, has_profile: bool) -> bool:
    """Whether a request of this account may be sent to `host` at all (else the host is skipped).

    A host that requires a profile is never sent a request without one (it would answer 400, which is
    not a reason to move on: A8.5 — 400 is terminal); codewhisperer is never sent an API key (it
    authenticates the key, then refuses every body with 400).
    """
    if host.requires_profile and not has_profile:
        return False
    return not (host.kind is HostKind.CODEWHISPERER and auth_kind == AuthKind.API_KEY)


def sends_profile(auth_kind: str) -> bool:
    """Whether a request body carries the account's `profileArn` (when it has one), on every host alike.

    API-key requests never carry one (A9: "not sent by peers"); every other request carries the
    account's own ARN when it has one (the runtime host requires it; on q it attributes usage, JW PR
    #150). Builder ID accounts have none, so they never send one — which q requires (A9).
    """
    return auth_kind != AuthKind.API_KEY


def shape_document(document: dict[str, object], host: Host) -> dict[str, object]:
    """The request document as `host` accepts it: without the legacy fields a runtime host refuses.

    Returns `document` itself when nothing changes (the common case costs no copy).
    """
    if not host.refuses_legacy_fields:
        return document
    state = document.get("conversationState")
    legacy_state = isinstance(state, dict) and any(field in state for field in LEGACY_STATE_FIELDS)
    if not legacy_state and not any(field in document for field in LEGACY_TOP_LEVEL_FIELDS):
        return document
    shaped = {key: value for key, value in document.items() if key not in LEGACY_TOP_LEVEL_FIELDS}
    if legacy_state and isinstance(state, dict):
        shaped["conversationState"] = {key: value for key, value in state.items() if key not in LEGACY_STATE_FIELDS}
    return shaped
