"""The one protocol the fleet's slots and rests are kept through: in Redis (q2api.fleet.redis_ledger)
or in the store (q2api.fleet.store_ledger).

Both keep the same promise: a slot is checked and counted in one atomic step, so two workers (or
replicas) taking the last slot of an account at once can never both have it; and the step that takes
a slot also hands over the account's host rests, so learning them costs no round trip of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

# A slot is held this long after it was taken or last renewed. The process that holds it renews it every
# SLOT_RENEW_SECONDS while its request runs, so the slots of a worker that died (and renews nothing
# more) are free again SLOT_LEASE_SECONDS after at most: seconds, where a request may run for minutes.
SLOT_LEASE_SECONDS = 6.0
SLOT_RENEW_SECONDS = 2.0

Rests = dict[str, tuple[int, float]]  # host URL → (failures in a row, until: epoch seconds)


@dataclasses.dataclass(frozen=True, slots=True)
class Taken:
    lease: str | None  # the slot; None: the account's slots are all taken
    in_flight: int  # the account's requests in flight, this one included when taken
    rests: Rests  # the account's hosts resting now


class FleetLedger(Protocol):
    async def take(self, account_id: str, lease: str, cap: int) -> Taken:
        """Take a slot of `account_id` as `lease` if fewer than `cap` are taken; its rests either way."""
        ...

    async def give_back(self, account_id: str, lease: str) -> None: ...

    async def renew(self, account_id: str, leases: Sequence[str]) -> None:
        """The slots `leases` of `account_id` (those still there) are held SLOT_LEASE_SECONDS from now."""
        ...

    async def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None: ...

    async def served(self, account_id: str, host_url: str) -> None: ...

    async def close(self) -> None: ...
