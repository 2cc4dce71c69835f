"""The fleet's slots and rests in Redis (`Q2API_REDIS_URL`): per account, a sorted set of its slots
(scored by when each lease expires, in Redis' clock) and a hash of its resting hosts; one Lua script
takes a slot and reads the rests in one step.

The machinery is the client keys' (q2api.tenants.redis_counters): the same connection settings, the
same guard against a script run too late to matter (it carries the moment it stops being useful, in
Redis' clock, and then changes nothing), the same renewal script. Every key of one account shares a
hash tag (`{account id}`), so a Redis Cluster keeps them in one slot, and starts with the prefix
(`Q2API_REDIS_PREFIX`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import redis.asyncio as aioredis

from q2api.fleet.ledger import SLOT_LEASE_SECONDS, Rests, Taken
from q2api.tenants.counters import CountersLate
from q2api.tenants.redis_counters import (
    DEFAULT_PREFIX,
    NOW_SCRIPT,
    RENEW_SCRIPT,
    SOCKET_TIMEOUT,
    USEFUL_FOR,
    ClockOffset,
)

_REST_KEEP_SECONDS = 3600  # a hash of rests outlives its last write this long (the longest rest is 30 min)

# KEYS: the account's slots, its rests. ARGV: useful until (Redis' clock), cap, lease, lease seconds.
_TAKE = (
    NOW_SCRIPT
    + """
if now > tonumber(ARGV[1]) then
  return {'late'}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local in_flight = redis.call('ZCARD', KEYS[1])
local verdict = 'full'
if in_flight < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[4])) + 1)
  in_flight = in_flight + 1
  verdict = 'taken'
end
local answer = {verdict, tostring(in_flight)}
local rests = redis.call('HGETALL', KEYS[2])
for i = 1, #rests do
  answer[2 + i] = rests[i]
end
return answer
"""
)


class RedisLedger:
    def __init__(self, url: str, prefix: str = DEFAULT_PREFIX) -> None:
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=SOCKET_TIMEOUT, decode_responses=True
        )
        self._take = self._redis.register_script(_TAKE)
        self._renew = self._redis.register_script(RENEW_SCRIPT)
        self._clock = ClockOffset(self._redis)
        self._fleet = f"{prefix}:fleet"

    def _slots_key(self, account_id: str) -> str:
        return f"{self._fleet}:{{{account_id}}}:slots"

    def _rests_key(self, account_id: str) -> str:
        return f"{self._fleet}:{{{account_id}}}:rests"

    async def take(self, account_id: str, lease: str, cap: int) -> Taken:
        """Raises CountersLate when Redis ran the script too late to matter (it then changed nothing)."""
        useful_until = time.time() + await self._clock.offset() + USEFUL_FOR
        answer = await self._take(
            keys=[self._slots_key(account_id), self._rests_key(account_id)],
            args=[useful_until, cap, lease, SLOT_LEASE_SECONDS],
        )
        if answer[0] == "late":
            raise CountersLate(f"Redis ran the slot's script more than {USEFUL_FOR:g}s after it was sent")
        now = time.time()
        rests: Rests = {}
        fields = answer[2:]
        for host_url, value in zip(fields[::2], fields[1::2], strict=True):
            failures, until = value.split(":", 1)
            if float(until) > now:
                rests[host_url] = (int(failures), float(until))
        return Taken(lease if answer[0] == "taken" else None, int(answer[1]), rests)

    async def give_back(self, account_id: str, lease: str) -> None:
        await self._redis.zrem(self._slots_key(account_id), lease)

    async def renew(self, account_id: str, leases: Sequence[str]) -> None:
        if leases:
            await self._renew(keys=[self._slots_key(account_id)], args=[SLOT_LEASE_SECONDS, *leases])

    async def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None:
        key = self._rests_key(account_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, host_url, f"{failures}:{until!r}")
            pipe.expire(key, _REST_KEEP_SECONDS)
            await pipe.execute()

    async def served(self, account_id: str, host_url: str) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hdel(self._rests_key(account_id), host_url)
            await pipe.execute()

    async def close(self) -> None:
        await self._redis.aclose()
