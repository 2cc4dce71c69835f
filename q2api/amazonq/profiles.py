"""An account's `profileArn`: `ListAvailableProfiles` (docs/protocol.md#profiles).

Which login has which profile:

* social (Kiro desktop): the refresh reply carries it (q2api.accounts.refresh), nothing to ask;
* IAM Identity Center: `ListAvailableProfiles`, asked in us-east-1 **and** eu-central-1 — a 403 or an
  empty list in one region is not final (the Q CLI asks both and concatenates, PPK #104/#131);
* Builder ID: none by design (403 "AWS Builder ID is not supported for this operation.");
* Kiro API key: none (403 "Unsupported token type" in every region), and none is ever sent.

The call is awsJson: `POST /`, `X-Amz-Target: AmazonCodeWhispererService.ListAvailableProfiles`,
`Content-Type: application/x-amz-json-1.0`, body `{}` or `{"maxResults": n, "nextToken": "…"}`;
the answer `{"profiles": [{"arn": …, "profileName": …, …}], "nextToken"?}` (R QCLI
`shape_list_available_profiles_input.rs`, `types/_profile.rs`). 2026 peers send it to
`https://management.<region>.kiro.dev/` (docs/protocol.md#hosts: management is the home of configuration calls).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from urllib.parse import urlsplit

import aiohttp
import orjson

from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.bearer import authorization_headers
from q2api.amazonq.errors import UpstreamHTTPError, parse_error_reply
from q2api.amazonq.hosts import API_REGIONS, api_region, management_url

TARGET = "AmazonCodeWhispererService.ListAvailableProfiles"
PAGE_SIZE = 50
MAX_PAGES = 10  # a service that hands out next tokens forever must not keep us paging forever
_AWS_NAMES = (".amazonaws.com", ".kiro.dev")


@dataclasses.dataclass(frozen=True, slots=True)
class Profile:
    arn: str
    name: str

    @property
    def region(self) -> str | None:
        """`arn:aws:codewhisperer:<region>:<account>:profile/<ID>` → its region."""
        parts = self.arn.split(":")
        return parts[3] if len(parts) > 5 and parts[3] else None


@dataclasses.dataclass(frozen=True, slots=True)
class ProfileLookup:
    """What asking found: the profile chosen (None when there is none) and, without one, why."""

    profile: Profile | None
    detail: str  # what each host answered, for the log line and the account's status detail
    reached: bool  # at least one host answered (a lookup nobody answered says nothing about the account)

    @property
    def arn(self) -> str | None:
        return self.profile.arn if self.profile else None


def profile_hosts(endpoints: Sequence[str]) -> tuple[str, ...]:
    """Where to ask: the management hosts of both API regions, unless the gateway is pointed elsewhere.

    A configured endpoint that is not an AWS / Kiro name (a relay, the simulated upstream on loopback)
    is asked itself, as it stands in for every Amazon Q host.
    """
    own = tuple(url for url in endpoints if not (urlsplit(url).hostname or "").endswith(_AWS_NAMES))
    return own or tuple(management_url(region) for region in API_REGIONS)  # the Q CLI asks both too


async def resolve_profile(
    proxies: AccountProxies,
    hosts: Sequence[str],
    token: str,
    *,
    region: str | None = None,
    proxy_url: str | None = None,
    timeout: float = 15.0,
) -> ProfileLookup:
    """Ask every host; the profile of the account's region if one is listed there, else the first listed.

    Never raises for an answer: a refusal (Builder ID, an unsupported token) or a host out of reach is
    written into `detail`.
    """
    found: list[Profile] = []
    notes: list[str] = []
    reached = False
    for host in hosts:
        name = urlsplit(host).netloc or host
        try:
            profiles = await list_profiles(proxies, host, token, proxy_url=proxy_url, timeout=timeout)
        except UpstreamHTTPError as error:
            reached = True
            notes.append(f"{name}: HTTP {error.status} {error.message or error.code or ''}".strip())
            continue
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            notes.append(f"{name}: unreachable or unreadable ({type(exc).__name__})")
            continue
        reached = True
        notes.append(f"{name}: {len(profiles)} profile(s)")
        found.extend(profile for profile in profiles if profile not in found)
    return ProfileLookup(choose_profile(found, region), "; ".join(notes), reached)


def choose_profile(found: Sequence[Profile], region: str | None) -> Profile | None:
    """The profile of the account's API region if one is listed there, else the first listed (None: none)."""
    wanted = api_region(region) if region else None
    chosen = next((profile for profile in found if wanted and profile.region == wanted), None)
    return chosen or (found[0] if found else None)


async def list_profiles(
    proxies: AccountProxies,
    host: str,
    token: str,
    *,
    proxy_url: str | None = None,
    timeout: float = 15.0,
    token_type: str | None = None,
    max_pages: int = MAX_PAGES,
) -> list[Profile]:
    """Every page of one host's answer (at most `max_pages`). Raises UpstreamHTTPError for a refusal,
    aiohttp/TimeoutError for a host out of reach, ValueError for an answer that is not the documented shape.

    `token_type`: the account's (q2api.amazonq.bearer) — the gateway never lists a Kiro API key's profiles
    (it has none), `q2api probe` asks to see how the service refuses it."""
    url = host if host.endswith("/") else host + "/"
    session, route = proxies.route(proxy_url, url)
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": TARGET,
        "Accept": "application/json",
        **authorization_headers(token, token_type),
    }
    profiles: list[Profile] = []
    next_token: str | None = None
    for _ in range(max_pages):
        body: dict[str, object] = {"maxResults": PAGE_SIZE}
        if next_token:
            body["nextToken"] = next_token
        async with session.post(
            url, data=orjson.dumps(body), headers=headers, timeout=aiohttp.ClientTimeout(total=timeout), **route
        ) as response:
            raw = await response.read()
            if response.status != 200:
                raise parse_error_reply(
                    response.status, response.headers, raw, response.headers.get("x-amzn-requestid")
                )
        page, next_token = parse_profiles_page(raw)
        profiles.extend(page)
        if not next_token:
            break
    return profiles


def parse_profiles_page(raw: bytes) -> tuple[list[Profile], str | None]:
    """One answer's profiles (entries without an `arn` are skipped) and its next token."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ValueError("ListAvailableProfiles answered with a body that is not JSON") from None
    if not isinstance(document, dict):
        raise ValueError("ListAvailableProfiles answered with JSON that is not an object")
    entries = document.get("profiles")
    profiles = [
        Profile(entry["arn"], str(entry.get("profileName") or ""))
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("arn"), str) and entry["arn"]
    ]
    next_token = document.get("nextToken")
    return profiles, next_token if isinstance(next_token, str) and next_token else None
