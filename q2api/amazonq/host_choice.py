"""The one host choice every call to Amazon Q shares: chat, the catalogue, credits and web search.

An account's hosts come from its auth kind and region (q2api.amazonq.hosts) or the operator's
override; those that cannot take the account's requests at all are left out; the rest are ordered by
what failed lately (q2api.amazonq.host_rests). The chat client moves down that list when a host
fails; the other calls go to the head of it, so they follow the chat's failovers.
"""

from __future__ import annotations

from collections.abc import Sequence

from loguru import logger

from q2api.amazonq.account_access import Credential
from q2api.amazonq.host_rests import HostRests
from q2api.amazonq.hosts import Host, accepts_account, inference_hosts, parse_override
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver


class HostChoice:
    def __init__(
        self,
        override: str | Sequence[Host] = "",
        *,
        rests: HostRests | None = None,
        observer: UpstreamObserver = NO_OBSERVER,
    ) -> None:
        self.override: tuple[Host, ...] = parse_override(override) if isinstance(override, str) else tuple(override)
        self.rests = rests or HostRests()
        self._observer = observer

    def all_hosts(self, credential: Credential) -> tuple[Host, ...]:
        """The account's hosts in their configured order, before any rest or filter."""
        return inference_hosts(credential.auth_kind, credential.region, self.override)

    def hosts(self, credential: Credential) -> list[Host]:
        """The hosts to try for `credential`, in order; empty when none may be sent its requests."""
        has_profile = bool(credential.profile_arn)
        kind = credential.auth_kind
        usable = [host for host in self.all_hosts(credential) if accepts_account(host, kind, has_profile)]
        return self.rests.order(credential.account_id, usable)

    def preferred(self, credential: Credential) -> Host:
        """Where the account's next call goes (the head of `hosts`, or the first configured host)."""
        hosts = self.hosts(credential)
        return hosts[0] if hosts else self.all_hosts(credential)[0]

    def failed(self, credential: Credential, failed: Host, following: Host, status: str) -> None:
        """`failed` answered `credential` with an auth- or route-shaped failure and `following` is tried next."""
        seconds = self.rests.rest(credential.account_id, failed)
        self._observer.host_failover(failed.name, following.name)
        self._observer.host_switch(status)
        # Host names and a status only: nothing the client sent, nothing secret.
        logger.bind(rest_seconds=round(seconds)).warning(
            f"upstream host failed over: account={credential.label} from={failed.name} "
            f"to={following.name} status={status}"
        )

    def served(self, credential: Credential, host: Host) -> None:
        self.rests.served(credential.account_id, host)
