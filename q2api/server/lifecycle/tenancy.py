"""Who is calling, and what they may still do: the one place every front door checks client keys.

A request carries an environment key (`Q2API_API_KEYS`: unlimited, as ever), a key kept in the store
(`q2api keys`: held to its models, rates, concurrency and budgets by q2api.tenants.gate), or, on a
gateway with neither, nothing. Store keys are looked up by their SHA-256 and the answer cached for
`KEY_CACHE_SECONDS`: a key revoked on one replica stops working on every other within that time.

Once a request is over (its log line written), `finished` counts what it used against its key, gives
back its place in flight, and appends its row to the usage ledger — all off the request's path.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Callable

from starlette.requests import HTTPConnection

from q2api.anthropic.errors import AnthropicError
from q2api.server import metrics
from q2api.server.cross_site import NO_RETRY
from q2api.server.edge import ClientKeys, key_refusal, presented_key, store_unavailable
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.store.errors import STORE_ERRORS
from q2api.tenants.counters import Counters
from q2api.tenants.credit_estimate import CreditEstimate
from q2api.tenants.gate import (
    COUNTERS_DOWN_RETRY_SECONDS,
    Admission,
    LimitGate,
    LimitsUnchecked,
    check_model,
    check_standing,
)
from q2api.tenants.keys import KEY_PREFIX, KeyRecord, KeyStore, key_digest
from q2api.tenants.ledger import UsageLedger, UsageRow
from q2api.tenants.outage import Outage

KEY_CACHE_SECONDS = 2.0  # how long a looked-up key (or its absence) is trusted: revocation takes this long
_CACHED_KEYS = 4096  # a flood of made-up keys evicts the oldest answers, it does not grow memory


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    presented: str | None  # the key the request carried (None: an open gateway); never logged
    key: KeyRecord | None = None  # the store key, when it was one

    @property
    def label(self) -> str | None:
        return self.key.label if self.key is not None else None


class KeyDirectory:
    """Store keys by digest, each answer cached for a couple of seconds."""

    def __init__(self, store: KeyStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self._clock = clock
        self._answers: collections.OrderedDict[str, tuple[float, KeyRecord | None]] = collections.OrderedDict()
        self._usable: tuple[float, bool] | None = None

    async def lookup(self, presented: str) -> KeyRecord | None:
        digest = key_digest(presented)
        now = self._clock()
        cached = self._answers.get(digest)
        if cached is not None and now - cached[0] < KEY_CACHE_SECONDS:
            return cached[1]
        record = await self.store.by_digest(digest)
        self._answers[digest] = (now, record)
        self._answers.move_to_end(digest)
        while len(self._answers) > _CACHED_KEYS:
            self._answers.popitem(last=False)
        return record

    async def any_usable(self) -> bool:
        """Whether any store key is usable: then a gateway without environment keys is no longer open."""
        now = self._clock()
        if self._usable is not None and now - self._usable[0] < KEY_CACHE_SECONDS:
            return self._usable[1]
        usable = await self.store.count_usable() > 0
        self._usable = (now, usable)
        return usable


KEY_STORE_RETRY_SECONDS = 2  # the retry-after of a request whose key could not be read


def _unavailable() -> AnthropicError:
    # Logged by the outage's own lines (once a minute while it lasts), not once a request.
    return store_unavailable(
        "the client key store is unavailable; try again shortly", retry_after=KEY_STORE_RETRY_SECONDS
    )


class Tenancy:
    def __init__(
        self,
        env_keys: ClientKeys,
        directory: KeyDirectory,
        gate: LimitGate,
        ledger: UsageLedger,
    ) -> None:
        self._env_keys = env_keys
        self.directory = directory
        self.gate = gate
        self.ledger = ledger
        self._estimate = CreditEstimate()
        self._settling: set[asyncio.Task[None]] = set()
        self.key_store_outage = Outage(
            "the client key store", "requests with a store key get 503 (the environment's keys keep working)"
        )

    @property
    def counters(self) -> Counters:
        return self.gate.counters

    async def identify(self, request: HTTPConnection) -> Caller:
        """The caller, or the 401 (no key, unknown, revoked, expired) or 503 (the key store is down) to answer."""
        presented = presented_key(request)
        if presented is not None and self._env_keys.matches(presented):
            return Caller(presented)
        try:
            if presented is not None and presented.startswith(KEY_PREFIX):
                record = await self.directory.lookup(presented)
                if record is not None:
                    check_standing(record, time.time())
                    return Caller(presented, record)
            open_gateway = not self._env_keys.required and not await self.directory.any_usable()
        except STORE_ERRORS as exc:
            # Never served unchecked: what the key may do is in the record that could not be read.
            self.key_store_outage.failed(exc, "refused")
            raise _unavailable() from None
        self.key_store_outage.answered()
        if open_gateway:
            return Caller(None)
        raise AnthropicError(401, key_refusal(request), headers=NO_RETRY)

    @staticmethod
    def check_model(caller: Caller, model: str) -> None:
        if caller.key is not None:
            check_model(caller.key, model)

    async def admit(self, caller: Caller, model: str, input_tokens: int) -> Admission | None:
        """Hold a store key's request to its limits before any upstream call (raises the error to answer)."""
        if caller.key is None:
            return None
        try:
            return await self.gate.admit(caller.key, model, input_tokens)
        except LimitsUnchecked as refused:  # the counters are down, and Q2API_LIMITS_WHEN_STORE_DOWN=refuse
            raise store_unavailable(str(refused), retry_after=COUNTERS_DOWN_RETRY_SECONDS) from None

    def finished(self, exchange: Exchange, admission: Admission | None) -> None:
        """The request is over (its line written): count it against its key, and into the ledger."""
        tokens = exchange.input_tokens + exchange.output_tokens
        if exchange.credits_metered:
            credits, estimated = exchange.credits, False
            self._estimate.observe(exchange.upstream_model, tokens, exchange.credits)
        elif exchange.upstream_attempts == 0:
            credits, estimated = 0.0, False  # refused before any upstream call: nothing was spent
        else:
            credits, estimated = self._estimate.estimate(exchange.upstream_model, tokens), True
        if exchange.key_label is not None:
            metrics.observe_key_request(
                exchange.key_label, exchange.status, exchange.input_tokens, exchange.output_tokens, credits
            )
        if admission is not None:
            task = self.gate.settle_soon(admission, tokens, credits)
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
        duration = time.perf_counter() - exchange.started
        self.ledger.record(
            UsageRow(
                at=time.time() - duration,
                request_id=exchange.request_id,
                key_label=exchange.key_label,
                account=exchange.account,
                model=exchange.model,
                door=exchange.route,
                status=exchange.status,
                input_tokens=exchange.input_tokens,
                output_tokens=exchange.output_tokens,
                cache_read_tokens=exchange.cache_read_tokens,
                cache_write_tokens=exchange.cache_write_tokens,
                credits=credits,
                credits_estimated=estimated,
                ttft_ms=None
                if exchange.first_content_seconds is None
                else round(exchange.first_content_seconds * 1000, 1),
                duration_ms=round(duration * 1000, 1),
            )
        )

    async def close(self) -> None:
        """At shutdown: let the settling counts finish, and write the ledger's last rows."""
        if self._settling:
            await asyncio.wait(set(self._settling), timeout=5.0)
        await self.ledger.close()
        await self.gate.close()
        await self.gate.counters.close()
