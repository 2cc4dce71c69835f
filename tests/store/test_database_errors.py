"""A database error never carries a statement's parameters into a traceback, a log line or the CLI (issue 26, item 4).

SQLAlchemy quotes each failing statement's parameters in its error message (`[parameters: (…)]`),
and the store's own `StoreUnavailable` chains that error: every traceback that shows it would
print token ciphertexts. The engines are created with `hide_parameters=True`; checked here with
real PostgreSQL and MariaDB errors (a value too long for its column).
"""

from __future__ import annotations

import asyncio
import traceback

import pytest
import sqlalchemy as sa
from loguru import logger

from q2api.store.database_url import parse_database_url
from q2api.store.errors import StoreUnavailable
from q2api.store.shared_database import SharedDatabase
from tests.support.databases import SHARED_KINDS, scratch_database_url
from tests.support.gateway_harness import capture_logs

CIPHERTEXT = "gAAAAABm-NEVER-SHOWN-ciphertext-" + "Zx9" * 20


async def failing_write(database_url: str) -> StoreUnavailable:
    database = SharedDatabase(parse_database_url(database_url))

    def write(connection: sa.Connection) -> None:
        connection.execute(sa.text("CREATE TABLE secrets (token VARCHAR(16))"))
        connection.execute(sa.text("INSERT INTO secrets (token) VALUES (:token)"), {"token": CIPHERTEXT})

    try:
        with pytest.raises(StoreUnavailable) as failed:
            await database.write(write)
    finally:
        await database.dispose()
    return failed.value


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_a_database_error_shows_no_statement_parameter_anywhere(kind: str) -> None:
    with scratch_database_url(kind) as url:
        error = asyncio.run(failing_write(url))
    whole_traceback = "".join(traceback.format_exception(error))  # the chained SQLAlchemy error included
    assert "too long" in whole_traceback.lower()  # a real database error, not a connection failure
    assert CIPHERTEXT not in whole_traceback and CIPHERTEXT not in str(error)
    assert "parameters hidden" in whole_traceback
    with capture_logs() as logs:
        logger.opt(exception=error).error("the store failed")
    assert CIPHERTEXT not in logs.text and "StoreUnavailable" in logs.text
