"""The counters in Redis (`Q2API_REDIS_URL`): one key per window of a key's limits, a sorted set of
its requests in flight, and one Lua script that checks and counts an admission atomically (Redis
runs a script whole, with nothing of another client between its commands).

Every Redis key of one client key shares a hash tag (`{key_…}`), so a Redis Cluster keeps them in
one slot, which a script touching several keys needs.

A Redis that stops answering (frozen, a network partition) fails an admission after `SOCKET_TIMEOUT`,
but the script already sent is still run when it answers again, for a request that no longer waits
for it: it would take a place in flight that nobody gives back. So a script carries the moment it
stops being useful, in Redis' own clock (its offset from this process's clock is measured with
`TIME`, `ClockOffset`), and a script that runs later changes nothing. Places in flight are scored
in Redis' clock too, and expire LEASE_SECONDS after they were taken or last renewed (the gate renews
the places of its requests still running). Every key starts with the prefix
(`Q2API_REDIS_PREFIX`, `q2api` by default), so deployments (or test runs) sharing one Redis database
keep apart, and each can find and delete its own keys.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from q2api.tenants.counters import (
    CONCURRENCY_RETRY_SECONDS,
    LEASE_SECONDS,
    Addition,
    Admitted,
    CountersLate,
    Refused,
    WindowRef,
    new_lease,
)
from q2api.tenants.windows import Window

DEFAULT_PREFIX = "q2api"
SOCKET_TIMEOUT = 2.0  # seconds: a Redis that stops answering fails the check, it does not hang it
# A script is useful for this long after it is sent (the caller waits SOCKET_TIMEOUT for the answer:
# the margin is for the answer's way back and for the error of the measured clock offset).
USEFUL_FOR = SOCKET_TIMEOUT / 2
_OFFSET_EVERY = 60.0  # seconds between measures of Redis' clock
_KEEP_AFTER_END = 3600  # seconds a window's counter outlives its window (read late by the keys panel)

# Redis' clock in seconds (TIME: scripts may read it since Redis 5, replicated by their effects).
NOW_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
"""

# KEYS: one per window, then the set of leases.
# ARGV: useful until (Redis' clock), number of windows, lease id ('' for none), concurrency (-1: no
#       limit), lease seconds, then per window: cost, limit, seconds to keep it.
_ADMIT = (
    NOW_SCRIPT
    + """
if now > tonumber(ARGV[1]) then
  return {'late'}
end
local n = tonumber(ARGV[2])
local used = {}
for i = 1, n do
  local cost = tonumber(ARGV[5 + 3 * (i - 1) + 1])
  local limit = tonumber(ARGV[5 + 3 * (i - 1) + 2])
  local amount = tonumber(redis.call('GET', KEYS[i]) or '0')
  if (cost > 0 and amount + cost > limit) or (cost == 0 and amount >= limit) then
    return {'refused', tostring(i), tostring(amount)}
  end
  used[i] = amount
end
local concurrency = tonumber(ARGV[4])
if concurrency >= 0 then
  local leases = KEYS[n + 1]
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  local in_flight = redis.call('ZCARD', leases)
  if in_flight >= concurrency then
    return {'refused', '0', tostring(in_flight)}
  end
  redis.call('ZADD', leases, now + tonumber(ARGV[5]), ARGV[3])
  redis.call('EXPIRE', leases, math.ceil(tonumber(ARGV[5])) + 1)
end
local result = {'admitted'}
for i = 1, n do
  local cost = tonumber(ARGV[5 + 3 * (i - 1) + 1])
  local total = used[i]
  if cost > 0 then
    total = tonumber(redis.call('INCRBYFLOAT', KEYS[i], cost))
  end
  redis.call('EXPIRE', KEYS[i], tonumber(ARGV[5 + 3 * (i - 1) + 3]))
  result[i + 1] = tostring(total)
end
return result
"""
)


# KEYS: the set of leases. ARGV: lease seconds, then the leases still held (an absent one stays absent).
RENEW_SCRIPT = (
    NOW_SCRIPT
    + """
local expires = now + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', expires, ARGV[i])
end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 1)
return 1
"""
)


def _keep_seconds(end: float, now: float) -> int:
    return max(int(end - now), 0) + _KEEP_AFTER_END


class ClockOffset:
    """How far Redis' clock is ahead of this process's (`time.time`), measured with TIME now and then."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._offset = 0.0
        self._measured_at: float | None = None

    async def offset(self) -> float:
        if self._measured_at is None or time.monotonic() - self._measured_at > _OFFSET_EVERY:
            sent = time.time()
            seconds, microseconds = await self._redis.time()
            received = time.time()
            self._offset = seconds + microseconds / 1e6 - (sent + received) / 2
            self._measured_at = time.monotonic()
        return self._offset


class RedisCounters:
    def __init__(self, url: str, prefix: str = DEFAULT_PREFIX) -> None:
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=SOCKET_TIMEOUT, decode_responses=True
        )
        self._admit = self._redis.register_script(_ADMIT)
        self._renew = self._redis.register_script(RENEW_SCRIPT)
        self._clock = ClockOffset(self._redis)
        self._tenants = f"{prefix}:tenants"

    def _window_key(self, key_id: str, name: str, start: float) -> str:
        return f"{self._tenants}:{{{key_id}}}:{name}:{int(start)}"

    def _leases_key(self, key_id: str) -> str:
        return f"{self._tenants}:{{{key_id}}}:leases"

    async def admit(
        self, key_id: str, windows: Sequence[Window], concurrency: int | None, now: float
    ) -> Admitted | Refused:
        """Raises CountersLate when Redis ran the script too late to matter (it then changed nothing)."""
        keys = [self._window_key(key_id, window.name, window.start) for window in windows] + [self._leases_key(key_id)]
        lease = new_lease() if concurrency is not None else ""
        useful_until = time.time() + await self._clock.offset() + USEFUL_FOR
        arguments: list[Any] = [
            useful_until,
            len(windows),
            lease,
            -1 if concurrency is None else concurrency,
            LEASE_SECONDS,
        ]
        for window in windows:
            arguments += [window.cost, window.limit, _keep_seconds(window.end, now)]
        answer = await self._admit(keys=keys, args=arguments)
        if answer[0] == "late":
            raise CountersLate(f"Redis ran the admission more than {USEFUL_FOR:g}s after it was sent")
        if answer[0] == "refused":
            index, amount = int(answer[1]), float(answer[2])
            if index == 0:
                return Refused(None, amount, CONCURRENCY_RETRY_SECONDS)
            window = windows[index - 1]
            return Refused(window, amount, window.end - now)
        used = {window.name: float(total) for window, total in zip(windows, answer[1:], strict=True)}
        return Admitted(lease or None, used)

    async def settle(self, key_id: str, lease: str | None, additions: Sequence[Addition]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            if lease is not None:
                pipe.zrem(self._leases_key(key_id), lease)
            for windows, amount in additions:
                if not amount:
                    continue
                for name, start, end in windows:
                    key = self._window_key(key_id, name, start)
                    pipe.incrbyfloat(key, amount)
                    pipe.expire(key, _keep_seconds(end, time.time()))
            await pipe.execute()

    async def renew(self, key_id: str, leases: Sequence[str]) -> None:
        if leases:
            await self._renew(keys=[self._leases_key(key_id)], args=[LEASE_SECONDS, *leases])

    async def used(self, key_id: str, windows: Sequence[WindowRef]) -> dict[str, float]:
        values = await self._redis.mget([self._window_key(key_id, name, start) for name, start, _end in windows])
        return {name: float(value or 0) for (name, _start, _end), value in zip(windows, values, strict=True)}

    async def close(self) -> None:
        await self._redis.aclose()
