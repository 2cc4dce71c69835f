"""The account choice of a pinned turn (session affinity): the pinned account while it is eligible,
else the pool's choice and the reason it was passed over."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

import pytest

from q2api.amazonq.account_choice import AccountChoice
from q2api.amazonq.inflight import InflightSlots
from q2api.amazonq.turn_affinity import without_reasoning_before


@dataclass
class _Account:
    account_id: str
    label: str


class _Pool:
    """Accounts a, b, c; `unfit_reasons` says what the real pool would (q2api.accounts.pool.AccountPool.unfit)."""

    def __init__(self) -> None:
        self.accounts = {name: _Account(name, name.upper()) for name in ("a", "b", "c")}
        self.unfit_reasons: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.accounts)

    def pick(self, exclude: Collection[str] = (), model: str | None = None) -> _Account | None:
        choices = [account for name, account in self.accounts.items() if name not in exclude]
        return choices[0] if choices else None

    def manager(self, account_id: str) -> _Account | None:
        return self.accounts.get(account_id)

    def unfit(self, account_id: str, model: str | None = None) -> str | None:
        return "disabled" if account_id not in self.accounts else self.unfit_reasons.get(account_id)


def choice(pool: _Pool, cap: int = 2) -> AccountChoice:
    return AccountChoice(pool, InflightSlots(cap), wait=5.0)  # type: ignore[arg-type]


async def test_an_eligible_pinned_account_is_taken_even_when_others_are_less_busy():
    pool = _Pool()
    accounts = choice(pool)
    accounts.inflight.take("c")
    chosen, why = await accounts.take_pinned("c", "m")
    assert (chosen.account_id, why) == ("c", None) and accounts.inflight.count("c") == 2


@pytest.mark.parametrize("reason", ["resting", "model", "needs_login"])
async def test_an_unfit_pinned_account_is_passed_over_with_the_pools_reason(reason):
    pool = _Pool()
    pool.unfit_reasons["a"] = reason
    chosen, why = await choice(pool).take_pinned("a", "m")
    assert why == reason and chosen is not None


async def test_a_removed_account_is_disabled_and_one_that_failed_this_request_is_failed():
    pool = _Pool()
    del pool.accounts["a"]
    assert (await choice(pool).take_pinned("a", "m"))[1] == "disabled"
    chosen, why = await choice(_Pool()).take_pinned("a", "m", resting={"a"})
    assert why == "failed" and chosen.account_id != "a"


async def test_a_full_pinned_account_is_waited_for_briefly_then_left(monkeypatch):
    monkeypatch.setattr("q2api.amazonq.account_choice.PINNED_SLOT_WAIT", 0.5)
    pool = _Pool()
    accounts = choice(pool, cap=1)
    accounts.inflight.take("a")
    asyncio.get_running_loop().call_later(0.2, accounts.release, "a")
    chosen, why = await accounts.take_pinned("a", "m")  # its slot came back within the wait
    assert (chosen.account_id, why) == ("a", None)
    chosen, why = await accounts.take_pinned("a", "m")  # full again (the turn above holds it), and stays full
    assert why == "busy" and chosen.account_id != "a"


def test_the_foreign_history_loses_its_reasoning_and_the_rest_keeps_it():
    signed = {"reasoningText": {"text": "t", "signature": "s"}}
    history = [
        {"userInputMessage": {"content": "1"}},
        {"assistantResponseMessage": {"content": "a", "reasoningContent": signed}},
        {"userInputMessage": {"content": "2"}},
        {"assistantResponseMessage": {"content": "b", "reasoningContent": signed}},
    ]
    document = {"conversationState": {"history": history, "currentMessage": {}}}
    stripped = without_reasoning_before(document, 2)
    kept = stripped["conversationState"]["history"]
    assert "reasoningContent" not in kept[1]["assistantResponseMessage"]
    assert kept[3]["assistantResponseMessage"]["reasoningContent"] == signed
    assert "reasoningContent" in history[1]["assistantResponseMessage"]  # the caller's document is untouched
    assert without_reasoning_before(document, 0) is document
