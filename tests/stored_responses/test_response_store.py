"""The stored Responses conversations behave alike in SQLite, PostgreSQL and MySQL (MariaDB).

Every test runs once per store; `await open_responses()` opens another handle on the same store,
as another worker or replica would. Also: the conversation walk over `previous_response_id`,
and the `input_items` pages.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from q2api.stored_responses.sql_store import SqlResponseStore
from q2api.stored_responses.store import (
    ConversationGap,
    ResponseStore,
    StoredResponse,
    items_page,
    load_conversation,
)
from tests.support.stores import STORE_KINDS, store_opener

OpenResponses = Callable[[], Awaitable[ResponseStore]]
OWNER, OTHER = "owner-a" * 4, "owner-b" * 4


@pytest.fixture(params=STORE_KINDS)
async def open_responses(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[OpenResponses]:
    async with store_opener(request.param, tmp_path) as open_store:

        async def open_one() -> ResponseStore:
            return SqlResponseStore((await open_store()).database)

        yield open_one


@pytest.fixture
async def responses(open_responses: OpenResponses) -> ResponseStore:
    return await open_responses()


def stored(
    response_id: str,
    *,
    previous: str | None = None,
    owner: str = OWNER,
    ttl: float = 3600.0,
    text: str = "hello",
    model: str = "claude-sonnet-5-5",
) -> StoredResponse:
    now = time.time()
    output = [
        {
            "id": f"msg_{response_id}",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }
    ]
    return StoredResponse(
        id=response_id,
        owner=owner,
        previous_response_id=previous,
        created_at=now,
        expires_at=now + ttl,
        model=model,
        input_items=[
            {
                "id": f"in_{response_id}",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"to {response_id}"}],
            }
        ],
        response={"id": response_id, "object": "response", "output": output, "model": model},
    )


async def test_saved_responses_are_read_back_whole_by_another_handle(open_responses: OpenResponses):
    writer, reader = await open_responses(), await open_responses()
    big = "x" * 200_000  # a Codex turn: larger than MySQL's 64 KiB BLOB
    await writer.save(stored("resp_1", text=big))
    found = await reader.get("resp_1", OWNER)
    assert found is not None and found.response["output"][0]["content"][0]["text"] == big
    assert found.input_items[0]["id"] == "in_resp_1" and found.model == "claude-sonnet-5-5"
    assert found.previous_response_id is None


async def test_another_owner_sees_nothing_and_cannot_delete(responses: ResponseStore):
    await responses.save(stored("resp_1"))
    assert await responses.get("resp_1", OTHER) is None
    assert await responses.delete("resp_1", OTHER) is False
    assert await responses.get("resp_1", OWNER) is not None
    assert await responses.delete("resp_1", OWNER) is True
    assert await responses.get("resp_1", OWNER) is None
    assert await responses.delete("resp_1", OWNER) is False


async def test_expired_responses_are_gone_and_purged(responses: ResponseStore):
    await responses.save(stored("resp_new"))  # the first write also purged (nothing yet)
    await responses.save(stored("resp_old", ttl=-1.0))
    assert await responses.get("resp_old", OWNER) is None
    assert await responses.purge_expired() == 1
    assert await responses.purge_expired() == 0
    assert await responses.get("resp_new", OWNER) is not None


async def test_a_conversation_is_walked_back_to_its_first_response(open_responses: OpenResponses):
    one, other = await open_responses(), await open_responses()
    await one.save(stored("resp_1", text="first answer", model="claude-haiku-5-5"))
    await other.save(stored("resp_2", previous="resp_1", text="second answer"))
    await one.save(stored("resp_3", previous="resp_2", text="third answer"))

    conversation = await load_conversation(other, "resp_3", OWNER)
    ids = [item["id"] for item in conversation.items]
    assert ids == ["in_resp_1", "msg_resp_1", "in_resp_2", "msg_resp_2", "in_resp_3", "msg_resp_3"]
    assert conversation.model == "claude-sonnet-5-5"  # the last response's

    with pytest.raises(ConversationGap, match="not found"):
        await load_conversation(one, "resp_3", OTHER)
    await one.delete("resp_1", OWNER)
    with pytest.raises(ConversationGap) as gap:
        await load_conversation(one, "resp_3", OWNER)
    assert gap.value.missing_id == "resp_1" and "no longer stored" in str(gap.value)


async def save_chain(store: ResponseStore, count: int, *, prefix: str = "resp") -> str:
    """`count` responses, each continuing the one before; the newest one's id."""
    previous = None
    for n in range(count):
        await store.save(stored(f"{prefix}_{n}", previous=previous))
        previous = f"{prefix}_{n}"
    assert previous is not None
    return previous


async def test_a_continuation_reads_the_store_once_however_long_its_conversation(
    open_responses: OpenResponses, monkeypatch: pytest.MonkeyPatch
):
    """Continuing a conversation read the store once per earlier response (131 ms at depth 300; the
    bound is 10,000): one read now, whatever the depth."""
    responses = await open_responses()
    newest = await save_chain(responses, 60)
    database = responses._db  # type: ignore[attr-defined]
    reads = 0
    read = database.read

    async def counted(work: Any) -> Any:
        nonlocal reads
        reads += 1
        return await read(work)

    monkeypatch.setattr(database, "read", counted)
    conversation = await load_conversation(responses, newest, OWNER)
    assert reads == 1
    assert [item["id"] for item in conversation.items][:4] == ["in_resp_0", "msg_resp_0", "in_resp_1", "msg_resp_1"]
    assert len(conversation.items) == 120 and conversation.items[-1]["id"] == "msg_resp_59"


async def test_a_conversation_deeper_than_a_thousand_and_the_bound(
    open_responses: OpenResponses, monkeypatch: pytest.MonkeyPatch
):
    """MySQL stops a recursive query at 1,000 rows unless told otherwise; the bound is the store's own."""
    from q2api.stored_responses import store as store_module

    responses = await open_responses()
    newest = await save_chain(responses, 1_100)
    conversation = await load_conversation(responses, newest, OWNER)
    assert len(conversation.items) == 2_200 and conversation.items[0]["id"] == "in_resp_0"
    monkeypatch.setattr(store_module, "MAX_CONVERSATION_RESPONSES", 1_000)
    with pytest.raises(ConversationGap) as gap:
        await load_conversation(responses, newest, OWNER)
    assert gap.value.missing_id == "resp_99"  # the 1,001st from the newest: past the bound


def numbered(count: int) -> list[dict[str, Any]]:
    return [{"id": f"item_{n}"} for n in range(count)]


@pytest.mark.parametrize(
    ("order", "after", "before", "limit", "expected", "more"),
    [
        ("desc", None, None, 2, ["item_4", "item_3"], True),
        ("asc", None, None, 10, ["item_0", "item_1", "item_2", "item_3", "item_4"], False),
        ("asc", "item_1", None, 2, ["item_2", "item_3"], True),
        ("desc", "item_1", None, 5, ["item_0"], False),
        ("asc", None, "item_3", 5, ["item_0", "item_1", "item_2"], False),
    ],
)
def test_input_items_pages(
    order: str, after: str | None, before: str | None, limit: int, expected: list[str], more: bool
):
    page, has_more = items_page(numbered(5), limit=limit, order=order, after=after, before=before)
    assert [item["id"] for item in page] == expected and has_more is more
