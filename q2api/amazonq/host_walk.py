"""The host walk of one call: an account's hosts in order until one answers something else than "not here".

Each account has an ordered list of hosts (q2api.amazonq.host_choice). A host that answers with an
auth- or route-shaped failure (401/403/404 after one token refresh, the runtime host's
"profileArn is required", or no connection at all) rests for the account and the call moves to the
account's next host — one WARNING per switch (HostChoice.failed) — with a body shaped for that host
(q2api.amazonq.hosts). A 400 about the body is the request's, whichever host said it: the walk stops.
"""

from __future__ import annotations

import aiohttp

from q2api.amazonq.account_access import Credential
from q2api.amazonq.errors import (
    FailureKind,
    HostUnreachable,
    RefreshRejected,
    TimeoutPhase,
    UpstreamHTTPError,
    UpstreamTimeout,
)
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.hosts import Host
from q2api.amazonq.upstream_call import Opening, UpstreamCaller, read_error

# Statuses that say "not this host for this token" rather than "not this request" (A8.5, NR's
# KIRO_ENDPOINT_FALLBACK_STATUSES): the account's next host may serve the same body.
FAILOVER_STATUSES = frozenset({401, 403, 404})
PROFILE_REQUIRED_TEXT = "profilearn is required"

Answer = tuple[aiohttp.ClientResponse | None, UpstreamHTTPError | None]


class HostWalk:
    def __init__(self, hosts: HostChoice, caller: UpstreamCaller) -> None:
        self.hosts = hosts
        self._caller = caller

    async def call(self, opening: Opening, manager: Credential, token: str) -> Answer:
        """Call the account's hosts in order until one answers with something else than "not here".

        Returns the answer (a response, or the error already read from it). A rejected bearer token
        is refreshed once and repeated on the same host first — it may just have expired; if the host
        still refuses it, the host refuses this kind of token (A8.3) and the next host is tried.
        """
        hosts = self.hosts.hosts(manager)
        if not hosts:
            detail = "no Amazon Q host takes this account's requests (the host needs a profileArn it has none of)"
            await manager.mark_needs_login(detail)
            raise RefreshRejected(manager.label, detail)
        refreshed = False
        for index, host in enumerate(hosts):
            following = hosts[index + 1] if index + 1 < len(hosts) else None
            try:
                response = await self._caller.post(opening, manager, host, token)
            except (HostUnreachable, UpstreamTimeout) as exc:
                connect_failed = isinstance(exc, HostUnreachable) or exc.phase is TimeoutPhase.CONNECT
                if following is None or not connect_failed:
                    raise
                self.hosts.failed(
                    manager, host, following, "unreachable" if isinstance(exc, HostUnreachable) else "connect_timeout"
                )
                continue
            answer, error = await self._judged(opening, manager, host, response)
            if error is not None and error.kind is FailureKind.BEARER_INVALID and not refreshed:
                # Expired or revoked early: refresh once (unless another request already did) and
                # repeat the call once on this host, outside the retry budget; its answer is judged
                # like the first (a "profileArn is required" still moves on to the next host).
                token = await manager.refresh_after_rejection(token)
                refreshed = True
                response = await self._caller.post(opening, manager, host, token)
                answer, error = await self._judged(opening, manager, host, response)
            if error is None:
                return answer, None
            if error.status == 400 and not is_profile_refusal(error):
                return None, error  # a 400 about the body: terminal, whichever host answered it
            if following is None or error.suspended:
                return None, error  # a suspension is the account's, not the host's
            self.hosts.failed(manager, host, following, str(error.status))
        raise AssertionError("unreachable: the last host's answer is returned")  # pragma: no cover

    async def _judged(
        self, opening: Opening, manager: Credential, host: Host, response: aiohttp.ClientResponse
    ) -> Answer:
        """`host`'s answer as the response to relay (a 200, or a refusal no other host would change),
        else as the error read from it, which the caller weighs: refresh, move on, or give up."""
        if response.status not in FAILOVER_STATUSES and not _may_be_profile_refusal(response):
            return self._answered(opening, manager, host, response), None
        error = await read_error(response)
        opening.trace.classify_last(error.kind.value)
        return None, error

    def _answered(
        self, opening: Opening, manager: Credential, host: Host, response: aiohttp.ClientResponse
    ) -> aiohttp.ClientResponse:
        """`host` answered with something else than "not here": a 200 records it as the one that served."""
        if response.status == 200:
            opening.served_by = host.name
            self.hosts.served(manager, host)
        return response


def _may_be_profile_refusal(response: aiohttp.ClientResponse) -> bool:
    """A 400 whose body must be read to know whether it is the host's "profileArn is required"."""
    return response.status == 400


def is_profile_refusal(error: UpstreamHTTPError) -> bool:
    """The runtime host wants a profile the request has none of (A8.4): the host's rule, not the body's
    fault, so the account's next host may serve it (OR PR #13193 moves on for exactly this 400)."""
    return error.status == 400 and PROFILE_REQUIRED_TEXT in error.message.lower()
