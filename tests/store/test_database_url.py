"""`Q2API_DATABASE_URL`'s query string keeps the meaning each database's own clients give it."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from q2api.accounts.opening import open_account_store, opened_account_store
from q2api.store.database_url import parse_database_url
from q2api.store.errors import StoreUnavailable
from tests.support.databases import TEST_SECRET_KEY, run_sql, scratch_database_url

PASSWORD = "pw-NEVER-SHOWN-7f3a"


@pytest.fixture
def postgresql_url() -> Iterator[str]:
    with scratch_database_url("postgresql") as url:
        yield url


def test_libpq_parameters_travel_to_asyncpg_in_a_dsn_without_the_password() -> None:
    url = f"postgresql://q2api:{PASSWORD}@db:5432/q2api?sslmode=verify-full&application_name=q2api&prepared_statement_cache_size=0"
    engine_url, connect_args = parse_database_url(url).engine_arguments()
    assert engine_url.drivername == "postgresql+asyncpg"
    assert dict(engine_url.query) == {"prepared_statement_cache_size": "0"}  # SQLAlchemy's own, read by its dialect
    assert connect_args == {"dsn": "postgresql://?sslmode=verify-full&application_name=q2api"}
    assert parse_database_url("postgresql://q2api@db/q2api").engine_arguments()[1] == {}


def test_pymysql_tls_parameters_become_the_context_aiomysql_takes(tmp_path: Path) -> None:
    url = f"mysql://root:{PASSWORD}@db/q2api?ssl_capath={tmp_path}&ssl_check_hostname=false"
    engine_url, connect_args = parse_database_url(url).engine_arguments()
    assert engine_url.drivername == "mysql+aiomysql" and dict(engine_url.query) == {"charset": "utf8mb4"}
    context = connect_args["ssl"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED and not context.check_hostname
    assert parse_database_url("mysql://root@db/q2api").engine_arguments()[1] == {}


async def test_a_tls_file_that_cannot_be_read_is_a_store_error_without_the_password(tmp_path: Path) -> None:
    url = f"mysql://root:{PASSWORD}@127.0.0.1:1/q2api?ssl_ca={tmp_path / 'missing-ca.pem'}"
    with pytest.raises(StoreUnavailable) as refused:
        await open_account_store(url, tmp_path, TEST_SECRET_KEY)
    assert "FileNotFoundError" in str(refused.value) and PASSWORD not in str(refused.value)


async def test_libpq_parameters_reach_the_postgresql_session(postgresql_url: str, tmp_path: Path) -> None:
    url = f"{postgresql_url}&sslmode=prefer&application_name=q2api-test-{tmp_path.name}"

    async def sessions_so_named(connection) -> int:
        query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
        return int(await connection.scalar(query, {"name": f"q2api-test-{tmp_path.name}"}))

    async with opened_account_store(url, tmp_path, TEST_SECRET_KEY) as store:
        await store.add(auth_method="social", refresh_token="r", label="work")
        assert [account.label for account in await store.accounts()] == ["work"]
        assert run_sql(postgresql_url, sessions_so_named) >= 1  # the store's pooled connection, still open


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://q2api@db/q2api?password={PASSWORD}&sslmode=require",
        f"postgresql://q2api@db/q2api?sslmode=verify-full&sslkey=/k.pem&sslpassword={PASSWORD}",
        f"mysql://root@db/q2api?password={PASSWORD}",
        f"postgresql://q2api:{PASSWORD}@db/q2api?password={PASSWORD}",
    ],
    ids=["password", "sslpassword", "mysql password", "both places"],
)
def test_a_password_given_as_a_query_parameter_is_masked_wherever_the_url_is_shown(url: str) -> None:
    from q2api.settings import SettingsError, load_settings
    from q2api.store.database_url import mask_database_url

    parsed = parse_database_url(url)
    assert PASSWORD not in parsed.masked and "=***" in parsed.masked
    assert PASSWORD not in repr(parsed) and PASSWORD not in mask_database_url(url)
    assert PASSWORD not in repr(
        load_settings({"Q2API_DATABASE_URL": url, "Q2API_SECRET_KEY": TEST_SECRET_KEY}, env_file=None)
    )
    with pytest.raises(SettingsError) as refused:  # the message names the store it refuses
        load_settings({"Q2API_DATABASE_URL": url}, env_file=None)
    assert PASSWORD not in str(refused.value) and "q2api" in str(refused.value)
    # The driver still gets it.
    engine_url, connect_args = parsed.engine_arguments()
    assert PASSWORD in str(connect_args.get("dsn", "")) + str(dict(engine_url.query))
