"""The stores' limits on what an operator gives, declared once and checked before anything is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from q2api.accounts.device_login import is_aws_region
from q2api.accounts.field_limits import FIELD_CHARS, check_account_fields
from q2api.accounts.onboarding import NewAccount
from q2api.accounts.shared_schema import accounts as shared_accounts
from q2api.accounts.store import SqliteAccountStore


@pytest.mark.parametrize("field", sorted(FIELD_CHARS))
def test_each_field_is_refused_past_its_limit_or_with_a_nul_by_name(field: str) -> None:
    limit = FIELD_CHARS[field]
    check_account_fields(**{field: "x" * limit})
    with pytest.raises(ValueError, match=rf"^{field} is too long: {limit + 1} characters, at most {limit}$"):
        check_account_fields(**{field: "x" * (limit + 1)})
    with pytest.raises(ValueError, match=rf"^{field} must not contain a NUL"):
        check_account_fields(**{field: "a\x00b"})
    with pytest.raises(ValueError, match=rf"^{field} is not valid text"):
        check_account_fields(**{field: "a\ud800"})


def test_the_shared_columns_are_sized_from_the_limits() -> None:
    for column in ("label", "client_id", "profile_arn", "region", "id"):
        field = "account_id" if column == "id" else column
        assert shared_accounts.c[column].type.length == FIELD_CHARS[field]


def test_a_new_account_is_checked_before_anything_refreshes_it() -> None:
    with pytest.raises(ValueError, match=r"^label is too long"):
        NewAccount(label="l" * 256, refresh_token="r")
    with pytest.raises(ValueError, match=r"^refresh_token must not contain a NUL"):
        NewAccount(label="fine", refresh_token="r\x00")


async def test_the_sqlite_store_takes_the_same_limits(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    with pytest.raises(ValueError, match=r"^label is too long"):
        await store.add(auth_method="social", refresh_token="r", label="l" * 256)
    assert await store.accounts() == []


def test_a_region_with_a_trailing_newline_is_not_a_region() -> None:
    assert is_aws_region("us-east-1")
    assert not is_aws_region("us-east-1\n")
    assert not is_aws_region("us-east-1 ")
