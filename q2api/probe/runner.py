"""`q2api probe`'s run: each chosen account in turn, its steps in order, one call at a time.

Accounts come from the store (the environment account seeded first, as `q2api serve` does). An
account that needs a new login, or that rests after a throttle or a used-up quota (the cool-down
the gateway's workers share through the store), is not probed: the report says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

import aiohttp

from q2api.accounts.opening import opened_account_store
from q2api.accounts.records import Account, AccountRest, AccountStatus
from q2api.accounts.refresh import RefreshedToken, refresh_access_token
from q2api.accounts.store_protocol import AccountStore
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.account_proxies import AccountProxies
from q2api.amazonq.credits import iso_time
from q2api.amazonq.errors import UpstreamError
from q2api.amazonq.hosts import api_region, first_host, inference_hosts, parse_override
from q2api.amazonq.profiles import Profile, profile_hosts
from q2api.amazonq.upstream import UpstreamConfig
from q2api.models.table import DEFAULT_Q_MODEL
from q2api.probe import bodies
from q2api.probe.account_run import AccountRun, RunStopped
from q2api.probe.account_view import ProbeCredential
from q2api.probe.exchange import ProbeUpstream
from q2api.probe.generation_steps import cache_step, text_step, thinking_step, tool_call_step, web_search_step
from q2api.probe.host_step import hosts_step
from q2api.probe.limit_budget import LIMITS_CALLS
from q2api.probe.limit_steps import history_cap_step, payload_limit_step
from q2api.probe.redaction import Redactor
from q2api.probe.report import STOPPED, AccountReport, ProbeReport, StepReport
from q2api.probe.service_steps import catalogue_step, credits_step, profiles_step
from q2api.probe.steps import DEFAULT_BUDGET, DEFAULT_STEPS, LIMIT_STEPS, ProbeStep, RequestBudget
from q2api.server.wiring import env_account, refresh_endpoints, upstream_session
from q2api.settings import Settings

Progress = Callable[[str], None]
# The probe never sends a body over this (its payload search stops below it); the gateway's own limit
# (Q2API_UPSTREAM_MAX_REQUEST_BYTES) is what the search is about, so it does not apply here.
PROBE_MAX_REQUEST_BYTES = 64 * 1024 * 1024
UNSAVED_TOKENS_WAIT = 30.0  # seconds
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def _calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


class NoSuchAccount(LookupError):
    pass


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
    account: str | None = None  # an id or label; None: every enabled account
    limits: bool = False
    budget: int = DEFAULT_BUDGET


async def run_probe(
    settings: Settings,
    options: ProbeOptions,
    redactor: Redactor,
    progress: Progress,
    confirm_limits: Callable[[int], bool] | None = None,
    on_labels: Callable[[dict[str, str]], None] | None = None,
) -> ProbeReport | None:
    """Probe the chosen accounts. None when `confirm_limits` (asked with the number of accounts before any
    call, when --limits is on) declined. Raises NoSuchAccount when `options.account` names none.

    `on_labels` gets each account's label by the id the report names it with (for the terminal only: a
    label may be an e-mail address, which the report never holds)."""
    for prompt in (bodies.PLAIN_PROMPT, bodies.TOOL_PROMPT, bodies.TOOL_RESULT_PROMPT, bodies.THINKING_PROMPT):
        redactor.add_text(prompt)
    redactor.add_text(bodies.THINKING_FOLLOW_UP)
    redactor.add_text(bodies.CACHE_PROMPT_INTRO)
    for host in parse_override(settings.endpoint):  # a relay's URL may carry credentials
        parts = urlsplit(host.url)
        redactor.add_secret(parts.username)
        redactor.add_secret(parts.password)
    report = ProbeReport(limits=options.limits)
    async with (
        opened_account_store(settings.database_url, settings.data_dir, settings.secret_key) as store,
        upstream_session(settings.upstream_keepalive_seconds) as session,
    ):
        seed = env_account(settings)
        if seed is not None:
            await store.seed_from_env(seed)
        accounts = _chosen(await store.accounts(), options.account)
        if on_labels is not None:
            on_labels({redactor.name(account.id): account.label for account in accounts})
        if options.limits and confirm_limits is not None and not confirm_limits(len(accounts)):
            return None
        rests = await store.read_rests()
        proxies = AccountProxies(session, keepalive_seconds=settings.upstream_keepalive_seconds)
        try:
            for number, account in enumerate(accounts, 1):
                progress(f"account {number} of {len(accounts)}: {account.label} ({account.auth_method})")
                probe = _AccountProbe(settings, options, store, session, proxies, redactor, progress)
                report.accounts.append(await probe.run(account, rests.get(account.id)))
        finally:
            await proxies.close()
    return report


def _chosen(accounts: Sequence[Account], wanted: str | None) -> list[Account]:
    if wanted is None:
        return [account for account in accounts if account.enabled]
    chosen = [account for account in accounts if wanted in (account.id, account.label)]
    if not chosen:
        raise NoSuchAccount(wanted)
    return chosen[:1]


class _AccountProbe:
    def __init__(
        self,
        settings: Settings,
        options: ProbeOptions,
        store: AccountStore,
        session: aiohttp.ClientSession,
        proxies: AccountProxies,
        redactor: Redactor,
        progress: Progress,
    ) -> None:
        self._settings = settings
        self._options = options
        self._store = store
        self._session = session
        self._proxies = proxies
        self._redactor = redactor
        self._progress = progress
        self.refreshes = 0

    async def run(self, account: Account, rest: AccountRest | None) -> AccountReport:
        redactor = self._redactor
        for secret in (account.refresh_token, account.client_id, account.client_secret, account.access_token):
            redactor.add_secret(secret)
        redactor.add_secret(account.profile_arn)
        redactor.add_secret(account.proxy_url)
        if "@" in account.label:  # a label may be an e-mail address
            redactor.add_secret(account.label)
        redactor.add_personal(account.label)
        manager = TokenManager(account, self._store, self._counted_refresh())
        credential = ProbeCredential(manager, redactor, account.access_token)
        report = self._report(account, credential)
        if account.status is AccountStatus.NEEDS_LOGIN:
            return self._not_probed(report, "needs_login", "the account needs a new login")
        if rest is not None and rest.until > time.time():
            note = f"the account rests ({rest.reason}) until {iso_time(rest.until)}"
            return self._not_probed(report, "resting", note)
        try:
            await credential.access_token()
        except UpstreamError as exc:
            report.token_refreshes = self.refreshes
            return self._not_probed(report, "no_token", f"{type(exc).__name__}: {redactor.message(str(exc))}")
        report = self._report(account, credential)  # a social login learns its profile at its first refresh
        run = self._account_run(account, credential, report)
        steps = list(DEFAULT_STEPS) + (list(LIMIT_STEPS) if self._options.limits else [])
        try:
            for index, step in enumerate(steps, 1):
                if step is LIMIT_STEPS[0]:
                    run.upstream.budget.limit += LIMITS_CALLS  # --limits' own calls, on top of the default run's
                if step in LIMIT_STEPS:
                    self._progress(f"  [{index}/{len(steps)}] {step.value} … (this takes a while)")
                outcome = await self._step(run, step)
                report.steps.append(outcome)
                if step is ProbeStep.PROFILES:  # an IdC login's profile may have been found
                    self._describe_profile(report, credential)
                self._progress(
                    f"  [{index}/{len(steps)}] {step.value}: {outcome.outcome} — {outcome.note or ''} ({_calls(outcome.calls)})"
                )
        except RunStopped as stopped:
            report.stopped = {"step": stopped.step.value, "why": stopped.why}
            if stopped.detail:
                report.stopped["detail"] = redactor.name(stopped.detail)
            done = {outcome.step for outcome in report.steps}
            report.steps.append(StepReport(stopped.step, STOPPED, 0, f"stopped: {stopped.why}"))
            for step in steps:
                if step not in done and step is not stopped.step:
                    report.steps.append(StepReport(step, STOPPED, 0, f"not run: the run stopped ({stopped.why})"))
            self._progress(f"  stopped at {stopped.step.value}: {stopped.why} — nothing more is sent for this account")
        report.calls = run.upstream.budget.used
        report.token_refreshes = self.refreshes
        await self._tokens_saved(manager)
        return report

    async def _tokens_saved(self, manager: TokenManager) -> None:
        """Wait (a while) for refreshed tokens the store has not taken yet: a rotated refresh token the process
        forgets on exit would leave the account unable to refresh (q2api.accounts.token_saver)."""
        deadline = time.monotonic() + UNSAVED_TOKENS_WAIT
        while manager.has_unsaved_tokens and time.monotonic() < deadline:  # noqa: ASYNC110 - the saver has no event to wait on
            await asyncio.sleep(0.5)
        if manager.has_unsaved_tokens:
            self._progress(
                "  WARNING: the store did not take this account's refreshed tokens (see the ERROR lines above);"
                " if the refresh token was rotated, the account needs a new login"
            )

    def _account_run(self, account: Account, credential: ProbeCredential, report: AccountReport) -> AccountRun:
        settings = self._settings
        override = parse_override(settings.endpoint)
        has_profile = bool(credential.own_profile_arn)
        hosts = inference_hosts(account.auth_method, account.region, override)
        first = first_host(account.auth_method, account.region, has_profile, override)
        config = UpstreamConfig(
            endpoint=settings.endpoint,
            connect_timeout=settings.connect_timeout,
            first_byte_timeout=settings.first_byte_timeout,
            read_timeout=settings.read_timeout,
            max_retries=0,  # the first answer is the finding; a retry would only hide it
            max_request_bytes=PROBE_MAX_REQUEST_BYTES,
            account_max_inflight=settings.account_max_inflight,
            inflight_wait=settings.account_inflight_wait_seconds,
        )
        budget = RequestBudget(self._options.budget)
        upstream = ProbeUpstream(self._session, self._proxies, credential, config, self._redactor, budget, first)
        return AccountRun(upstream, report, hosts, settings.default_model or DEFAULT_Q_MODEL)

    async def _step(self, run: AccountRun, step: ProbeStep) -> StepReport:
        if step is ProbeStep.PROFILES:
            return await profiles_step(
                run, profile_hosts([host.url for host in parse_override(self._settings.endpoint)])
            )
        if step is ProbeStep.CATALOGUE:
            return await catalogue_step(run)
        if step is ProbeStep.CREDITS:
            return await credits_step(run, run.answered_host)
        if step is ProbeStep.HOSTS:
            return await hosts_step(run)
        if step is ProbeStep.TEXT:
            return text_step(run)
        if step is ProbeStep.TOOL_CALL:
            return await tool_call_step(run)
        if step is ProbeStep.THINKING:
            return await thinking_step(run)
        if step is ProbeStep.CACHE:
            return await cache_step(run)
        if step is ProbeStep.WEB_SEARCH:
            return await web_search_step(run)
        if step is ProbeStep.PAYLOAD_LIMIT:
            return await payload_limit_step(run)
        return await history_cap_step(run)

    def _report(self, account: Account, credential: ProbeCredential) -> AccountReport:
        region = account.region if account.region and _REGION.fullmatch(account.region) else None
        report = AccountReport(
            account=self._redactor.name(account.id),
            login=account.auth_method,
            region=region,
            api_region=api_region(account.region),
            has_profile=False,
            profile_region=None,
            proxy=account.proxy_url.split("://", 1)[0].lower() if account.proxy_url else None,
            budget=self._options.budget,
        )
        self._describe_profile(report, credential)
        return report

    @staticmethod
    def _describe_profile(report: AccountReport, credential: ProbeCredential) -> None:
        """Whether the account has a profile and its region (never the ARN: it holds the AWS account number)."""
        arn = credential.own_profile_arn
        region = Profile(arn, "").region if arn else None
        report.has_profile = bool(arn)
        report.profile_region = region if region and _REGION.fullmatch(region) else None

    def _not_probed(self, report: AccountReport, why: str, note: str) -> AccountReport:
        report.stopped = {"step": "", "why": why, "detail": self._redactor.message(note) or ""}
        self._progress(f"  not probed: {note}")
        return report

    def _counted_refresh(self) -> Callable[[Account], Awaitable[RefreshedToken]]:
        # No profile lookup inside the refresh: the probe's profiles step makes it, counted and recorded.
        endpoints = dataclasses.replace(refresh_endpoints(self._settings), profile_hosts=())
        refresh = functools.partial(refresh_access_token, self._session, endpoints=endpoints, proxies=self._proxies)

        async def counted(account: Account) -> RefreshedToken:
            self.refreshes += 1
            result = await refresh(account)
            self._redactor.add_secret(result.access_token)
            self._redactor.add_secret(result.refresh_token)
            self._redactor.add_secret(result.profile_arn)
            return result

        return counted
