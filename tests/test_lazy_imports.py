"""What a configuration does not use is not imported (issue 33: a worker's idle memory).

A gateway with no admin key, no account proxy and the SQLite store builds its command line and its app
without the probe, the admin API, aiohttp-socks or SQLAlchemy's MySQL dialect (each ~0.2-1 MB of a
worker's RSS; BENCHMARKS.md, "Second pass"). Checked in a fresh interpreter, whose modules are only
what this path imported.
"""

from __future__ import annotations

import subprocess
import sys

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.schema import CreateTable

from q2api.stored_responses.table import responses

DEFERRED = (
    "aiohttp_socks",
    "python_socks",
    "sqlalchemy.dialects.mysql",
    "q2api.probe.runner",
    "q2api.admin.routes",
    "q2api.admin.logins",
    "q2api.amazonq.proxy_connector",
)

BUILD_THE_SERVE_PATH = """
import sys
from q2api.cli.main import build_parser
build_parser()
from q2api.admin.app import create_gateway_app
from q2api.settings import Settings
create_gateway_app(Settings())
import q2api.server.gateway, q2api.accounts.opening, q2api.store.sqlite_database
print(" ".join(sorted(name for name in sys.modules if name.startswith(DEFERRED))))
"""


def test_the_serve_path_imports_none_of_what_it_does_not_use():
    code = f"DEFERRED = {DEFERRED!r}\n" + BUILD_THE_SERVE_PATH
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert answer.stdout.split() == []


def test_an_admin_key_still_brings_the_admin_api():
    code = (
        "import sys\nfrom q2api.admin.app import create_gateway_app\nfrom q2api.settings import Settings\n"
        "create_gateway_app(Settings(admin_key='k' * 32))\nprint('q2api.admin.routes' in sys.modules)"
    )
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert answer.stdout.strip() == "True"


def test_the_stored_responses_record_is_longtext_on_mysql_only():
    def record_type(dialect: sa.engine.Dialect) -> str:
        ddl = str(CreateTable(responses).compile(dialect=dialect))
        return next(line for line in ddl.splitlines() if "record" in line).split()[1]

    assert record_type(mysql.dialect()) == "LONGTEXT"
    assert record_type(postgresql.dialect()) == "TEXT"
    assert record_type(sqlite.dialect()) == "TEXT"
