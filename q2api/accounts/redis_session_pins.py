"""Pins in Redis (`Q2API_REDIS_URL`): one string key per conversation, `PREFIX:pins:<digest>` →
`<account id> <foreign history messages>`.

`find` is one `GETEX … EX idle`: it reads the pin and renews its idle time in the same round trip,
so a conversation that goes on is never written to again; `keep` sets the key only when the pin
changes. Redis expires an idle pin by itself.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from q2api.accounts.session_pins import Pin, needs_write

_SOCKET_TIMEOUT = 1.0  # seconds: on every turn's path, so a Redis that stops answering costs this at most


class RedisSessionPins:
    def __init__(self, url: str, idle_seconds: int, prefix: str = "q2api") -> None:
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url, socket_timeout=_SOCKET_TIMEOUT, socket_connect_timeout=_SOCKET_TIMEOUT, decode_responses=True
        )
        self._idle = max(int(idle_seconds), 1)
        self._prefix = f"{prefix}:pins:"

    async def find(self, key: str) -> Pin | None:
        value = await self._redis.getex(self._prefix + key, ex=self._idle)
        if not value:
            return None
        account_id, _, foreign = str(value).partition(" ")
        return Pin(account_id, int(foreign) if foreign.isdigit() else 0)

    async def keep(self, key: str, pin: Pin, found: Pin | None) -> None:
        if needs_write(pin, found):
            await self._redis.set(self._prefix + key, f"{pin.account_id} {pin.foreign_history}", ex=self._idle)

    async def close(self) -> None:
        await self._redis.aclose()
