"""The account as the probe shows it to the production upstream client (q2api.amazonq.upstream).

The probe sends its requests through the gateway's own `UpstreamClient` — body shaping per host,
`profileArn`, the token type header, the refresh of a rejected token, the account's proxy, the
in-flight slots — but decides itself where each one goes and what it changes:

* `PinnedHosts`: every call goes to the one host the step is probing, even one the gateway would
  skip for this account (a host that needs a profile the account has none of): that is the question;
* `ProbeCredential`: the account's token manager (its refreshes are real and saved, as the gateway's
  are), except that a request may be sent without the profile, a rejected token is refreshed at most
  once per run (a second host refusing a fresh token refuses its kind: no point in another), a Kiro
  API key is never "refreshed" (the gateway would mark it dead), and "needs a new login" is noted,
  not stored — a probe observes, it does not change an account's state;
* `ProbePool`: that one account, and what the client reported about it.
"""

from __future__ import annotations

from collections.abc import Collection

from q2api.accounts.tokens import TokenManager
from q2api.amazonq.account_access import Credential
from q2api.amazonq.bearer import API_KEY_AUTH
from q2api.amazonq.errors import FailureKind
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.hosts import Host
from q2api.probe.redaction import Redactor


class PinnedHosts(HostChoice):
    """A host choice of exactly one host, whatever the account: the one `pin` named last."""

    def __init__(self, host: Host) -> None:
        super().__init__((host,))
        self.host = host

    def pin(self, host: Host) -> None:
        self.host = host

    def all_hosts(self, credential: Credential) -> tuple[Host, ...]:
        return (self.host,)

    def hosts(self, credential: Credential) -> list[Host]:
        return [self.host]

    def preferred(self, credential: Credential) -> Host:
        return self.host


class ProbeCredential:
    """One account's access, seen through the probe (implements q2api.amazonq.account_access.Credential)."""

    def __init__(self, manager: TokenManager, redactor: Redactor, stored_token: str | None) -> None:
        self._manager = manager
        self._redactor = redactor
        self._stored_token = stored_token  # the access token the store held when the run began
        self.send_profile = True  # False: the next requests go without the account's profileArn
        # The profile the probe's own listing found for an IdC login that has none stored (the gateway's
        # refresh would have looked it up; the probe's profiles step does, and counts the calls).
        self.found_profile_arn: str | None = None
        self.proven = False  # the current token was accepted by some call of this run
        self.refreshes = 0  # refreshes asked for after a rejection (at most one per run)
        self.needs_login_detail: str | None = None  # what the gateway would have marked the account with
        self._token: str | None = None  # the last token handed out

    @property
    def account_id(self) -> str:
        return self._manager.account_id

    @property
    def label(self) -> str:
        return self._manager.label

    @property
    def auth_kind(self) -> str:
        return self._manager.auth_kind

    @property
    def region(self) -> str | None:
        return self._manager.region

    @property
    def proxy_url(self) -> str | None:
        return self._manager.proxy_url

    @property
    def profile_arn(self) -> str | None:
        return self.own_profile_arn if self.send_profile else None

    @property
    def own_profile_arn(self) -> str | None:
        """The account's profile (stored, or found by the profiles step), whether or not the next requests carry it."""
        if self.auth_kind == API_KEY_AUTH:
            return None
        return self._manager.profile_arn or self.found_profile_arn

    async def access_token(self) -> str:
        token = await self._manager.access_token()
        self._learn(token)
        return token

    async def refresh_after_rejection(self, rejected_token: str) -> str:
        """A refreshed token, unless refreshing cannot help: a key (never refreshed), a token refreshed in this
        run or accepted by another call of it (it has not expired: the host refuses its kind), or a second
        rejection. The client then repeats the call once with the same token, and gets the same answer."""
        fresh = rejected_token != self._stored_token or self.proven
        if self.auth_kind == API_KEY_AUTH or fresh or self.refreshes:
            return rejected_token
        self.refreshes += 1
        token = await self._manager.refresh_after_rejection(rejected_token)
        self._learn(token)
        return token

    async def mark_needs_login(self, detail: str) -> None:
        self.needs_login_detail = detail

    def _learn(self, token: str) -> None:
        if token != self._token:
            self.proven = False  # a new token has yet to be accepted
            self._token = token
        self._redactor.add_secret(token)
        self._redactor.add_secret(self._manager.profile_arn)


class ProbePool:
    """The one account a probe run uses (implements q2api.amazonq.account_access.CredentialPool)."""

    def __init__(self, credential: ProbeCredential) -> None:
        self.credential = credential
        self.failures: list[FailureKind | None] = []

    def __len__(self) -> int:
        return 1

    def pick(self, exclude: Collection[str] = (), model: str | None = None) -> ProbeCredential | None:
        return None if self.credential.account_id in exclude else self.credential

    def manager(self, account_id: str) -> ProbeCredential | None:
        return self.credential if account_id == self.credential.account_id else None

    def has_alternative(self, exclude: Collection[str], model: str | None = None) -> bool:
        return False

    def unfit(self, account_id: str, model: str | None = None) -> str | None:
        return None if self.manager(account_id) is not None else "disabled"

    def model_refused(self, account_id: str, model: str) -> None:
        return None  # the probe reports what Amazon Q answered; it chooses no other account

    def report_success(self, account_id: str) -> None:
        return None

    def report_failure(
        self, account_id: str, kind: FailureKind | None, retry_after: float | None = None, detail: str | None = None
    ) -> None:
        self.failures.append(kind)
