"""`q2api serve | demo | login | accounts … | keys … | usage | replay | captures … | probe` — the command line.

`q2api` alone (or `q2api accounts`, `q2api keys`, `q2api captures` alone) prints the help and exits 0
(asking what there is to do is not an error); a misspelt or missing command argument exits 2, as argparse does.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from q2api.settings import Settings

# Exit status of a command that refused to start because of its configuration.
EXIT_BAD_SETTINGS = 2
# The factory each uvicorn worker process imports and calls (see `logged_app_from_environment`).
SERVE_APP_FACTORY = "q2api.cli.main:logged_app_from_environment"


def logged_app_from_environment() -> Starlette:
    """The app built from the environment, with q2api's logging configured first.

    uvicorn starts `--workers N` as fresh processes that know nothing of the
    parent's logging set-up; each of them calls this factory, so each one logs
    in the configured format too.
    """
    from q2api.admin.app import create_gateway_app
    from q2api.server.logging_setup import configure_logging
    from q2api.settings import load_settings

    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    app = create_gateway_app(settings)
    # Everything alive now (modules, classes, functions: tens of thousands of objects) lives
    # for the whole process. Frozen, it is no longer rescanned by every full collection,
    # whose pauses otherwise stretch the gaps between deltas of every open stream.
    gc.collect()
    gc.freeze()
    return app


def _serve(args: argparse.Namespace) -> int:
    import uvicorn
    from loguru import logger

    from q2api.cli.env_check import deprecated_variables, unknown_variables
    from q2api.cli.metrics_dir import metrics_directory
    from q2api.server.cross_site import open_gateway_warning
    from q2api.server.logging_setup import configure_logging
    from q2api.server.transport import connection_cap_line, raise_open_file_limit, transport_limits, uvicorn_options
    from q2api.settings import VARIABLES, SettingsError, load_settings

    # A flag is its environment variable for this process and its workers (which read the environment).
    for variable in VARIABLES:
        value = getattr(args, variable.field, None) if variable.flag else None
        if value is not None:
            os.environ[variable.name] = value
    try:
        settings = load_settings()  # fail fast, before uvicorn starts, on a bad setting
    except SettingsError as exc:
        print(f"q2api: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    store_problem = _store_problem(settings)
    if store_problem:
        print(f"q2api: {store_problem}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    configure_logging(settings.log_level, settings.log_format)
    for warning in [notice.warning() for notice in deprecated_variables(os.environ)] + [
        notice.warning() for notice in unknown_variables(os.environ)
    ]:
        logger.warning(warning)
    exposed = open_gateway_warning(
        args.host, has_client_keys=bool(settings.api_keys), allowed_hosts=settings.allowed_hosts
    )
    if exposed is not None:
        logger.warning(exposed)
    raise_open_file_limit()  # before the workers start: they inherit it, and their cap follows from it
    logger.info(connection_cap_line(settings))
    logger.info(console_line(args.host, args.port, enabled=bool(settings.admin_key)))
    # Entered before the app (and so prometheus_client) is imported: the workers inherit the variable.
    with metrics_directory():
        uvicorn.run(
            SERVE_APP_FACTORY,
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=5,
            **uvicorn_options(transport_limits(settings)),
        )
    return 0


def console_line(host: str, port: int, *, enabled: bool) -> str:
    """Where the web console is (a wildcard address shown as loopback, where a browser on this machine
    finds it), or how to turn it on."""
    if not enabled:
        return "console: off (set Q2API_ADMIN_KEY to turn on /console and the admin API)"
    shown = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    if port == 0:
        return "console: /console on the port uvicorn reports below (sign in with Q2API_ADMIN_KEY)"
    return f"console: http://{shown}:{port}/console (sign in with Q2API_ADMIN_KEY)"


def _store_problem(settings: Settings) -> str | None:
    """Why the account store cannot be used, if it cannot (checked once, before any worker starts)."""
    import asyncio

    from q2api.accounts.opening import opened_account_store
    from q2api.store.errors import STORE_ERRORS
    from q2api.store.secret_box import SecretKeyMismatch

    async def read_the_store() -> None:
        async with opened_account_store(settings.database_url, settings.data_dir, settings.secret_key) as store:
            await store.accounts()

    try:
        asyncio.run(read_the_store())  # its own event loop, ended before uvicorn starts the server's
    except SecretKeyMismatch as exc:  # the key, not the store, is wrong: the message says which and what to do
        return str(exc)
    except STORE_ERRORS as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        # The database URL may hold a password: named, never printed.
        where = "Q2API_DATABASE_URL" if settings.database_url else f"Q2API_DATA_DIR={settings.data_dir}"
        return f"{where} cannot hold the account store: {reason}"
    return None


def _demo(args: argparse.Namespace) -> int:
    from q2api.cli.demo import run_demo, serve_demo

    if args.serve:
        return serve_demo(args.port)
    if args.port is not None:
        print("q2api demo: --port only goes with --serve", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    return run_demo()


def _accounts(args: argparse.Namespace) -> int:
    from q2api.cli.accounts import run_accounts_command

    return run_accounts_command(args)


def _login(args: argparse.Namespace) -> int:
    from q2api.cli.login import run_login

    return run_login(args)


def _captures(args: argparse.Namespace) -> int:
    from q2api.cli.captures import run_captures_command

    return run_captures_command(args)


def _replay(args: argparse.Namespace) -> int:
    from q2api.cli.replay import run_replay

    return run_replay(args)


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {raw!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, got {value}")
    return value


def _add_setting_flags(serve: argparse.ArgumentParser) -> None:
    """The settings the table marks as `serve` flags, under their group; each sets its variable."""
    from q2api.settings import VARIABLES
    from q2api.settings.reference import first_sentence

    flagged = [(variable, variable.flag) for variable in VARIABLES if variable.flag]
    for group in dict.fromkeys(variable.group for variable, _ in flagged):
        arguments = serve.add_argument_group(
            group.title.lower(), "each flag wins over its environment variable (docs/configuration.md)"
        )
        for variable, flag in flagged:
            if variable.group is not group:
                continue
            what = first_sentence(variable.description).replace("`", "").replace("%", "%%")
            default = variable.default_text or "none"
            arguments.add_argument(
                flag,
                dest=variable.field,
                metavar=variable.flag_metavar,
                help=f"{what} ({variable.name}, default {default})",
            )


def build_parser() -> argparse.ArgumentParser:
    from q2api import __version__

    parser = argparse.ArgumentParser(prog="q2api", description="Claude Messages API gateway for Amazon Q / Kiro")
    parser.add_argument("--version", action="version", version=f"q2api {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run the gateway",
        description="Run the gateway. Settings come from the environment and ./.env (the environment wins).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port to listen on (default: 8000)")
    serve.add_argument(
        "--workers", type=_positive_int, default=1, help="worker processes sharing one data dir (default: 1)"
    )
    _add_setting_flags(serve)
    serve.set_defaults(run=_serve)

    demo = commands.add_parser(
        "demo",
        help="try the gateway against a SIMULATED Amazon Q (no account, loopback only)",
        description=(
            "Run the real gateway on 127.0.0.1 in front of a SIMULATED Amazon Q (no account is used, nothing "
            "leaves the machine) and drive it with the official SDKs: a streamed reply and a streamed tool call "
            "through the Claude Messages API, then a chat completion and a two-turn Responses conversation through "
            "the OpenAI doors. With --serve, keep that gateway running for your own clients instead."
        ),
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="keep the simulated gateway running until Ctrl-C and print the ANTHROPIC_BASE_URL / "
        "OPENAI_BASE_URL lines (and the run's key) to paste into a client's shell",
    )
    demo.add_argument("--port", type=_port, help="with --serve: the port on 127.0.0.1 (default: 8000; 0: a free one)")
    demo.set_defaults(run=_demo)

    accounts = commands.add_parser(
        "accounts",
        help="manage the Amazon Q accounts in the store",
        description="Manage the accounts kept in the store (Q2API_DATABASE_URL, or SQLite under Q2API_DATA_DIR).",
    )
    account_commands = accounts.add_subparsers(dest="accounts_command", metavar="COMMAND")
    account_commands.add_parser(
        "list",
        help="list accounts (secrets are never printed)",
        description=(
            "List the accounts in the store, one row each: ID, LABEL, AUTH (the login method), STATUS "
            "(whether it serves, and its state, e.g. needs_login with why), REQUESTS (the calls every worker "
            "made with it, and how many failed), CREDITS (used/limit in the current usage period, - when unknown), REGION, "
            "PROFILE (the profile ARN), PROXY (its own proxy, credentials masked), TOKEN EXPIRES (when its "
            "access token does) and REFRESHED AT. Secrets are never printed."
        ),
    )
    add = account_commands.add_parser(
        "add",
        help="add an account (or replace the credentials of the account with this label)",
        description=(
            "Add an account. Give the secrets through Q2API_NEW_REFRESH_TOKEN and Q2API_NEW_CLIENT_SECRET "
            "(command-line arguments are visible to other users of the machine); on a terminal, "
            "missing secrets are asked for. A Kiro API key (ksk_…) is added instead of a login with "
            "Q2API_NEW_API_KEY=ksk_… q2api accounts add --label NAME. An existing account with the same "
            "label gets the new credentials."
        ),
    )
    add.add_argument("--label", required=True, help="a name for the account, shown in logs and listings")
    add.add_argument(
        "--auth-method",
        choices=["idc", "social"],
        default=None,
        help="idc (Builder ID / IAM Identity Center) or social (Kiro); default: idc when a client id is given",
    )
    add.add_argument(
        "--refresh-token", help="prefer the Q2API_NEW_REFRESH_TOKEN env var: argv is visible to other users"
    )
    add.add_argument("--client-id", help="OIDC client id (idc accounts)")
    add.add_argument("--client-secret", help="prefer the Q2API_NEW_CLIENT_SECRET env var")
    add.add_argument("--profile-arn", help="optional profileArn sent upstream (IdC logins: looked up when omitted)")
    add.add_argument(
        "--region", help="the account's AWS region (an IdC login's Identity Center region; default: us-east-1)"
    )
    add.add_argument(
        "--proxy",
        help="a proxy of the account's own for every call it makes: http://host:port or socks5://[user:pass@]host:port",
    )
    add.add_argument(
        "--no-verify",
        action="store_true",
        help="store the token without checking it by a refresh or a call (by default a refused one is not stored)",
    )
    for name, what, effect in (
        ("remove", "remove", "Remove an account and its tokens from the store."),
        ("enable", "serve with", "Serve requests with an account again."),
        ("disable", "stop serving with", "Stop serving requests with an account; it stays in the store."),
    ):
        command = account_commands.add_parser(
            name, help=f"{what} an account", description=f"{effect} A running gateway follows within seconds."
        )
        command.add_argument("account", help="account id or label")
    imports = account_commands.add_parser(
        "import",
        help="import the logins Kiro IDE, kiro-cli or the Amazon Q CLI already hold",
        description=(
            "Import the credentials Kiro IDE (kiro-auth-token.json and its client registration) and kiro-cli / "
            "the Amazon Q CLI (their SQLite auth_kv table) hold, social and IdC logins both. Without "
            "--kiro-ide or --kiro-cli, looks in ~/.aws/sso/cache and the platform's data directory. "
            "An account with the same label gets the new credentials. Secrets are never printed."
        ),
    )
    imports.add_argument("--kiro-ide", metavar="DIR", help="Kiro IDE's cache directory (default: ~/.aws/sso/cache)")
    imports.add_argument(
        "--kiro-cli",
        metavar="FILE",
        help="kiro-cli or Amazon Q CLI database (default: data.sqlite3 under the data directory's kiro-cli and amazon-q)",
    )
    imports.add_argument(
        "--label", help="label of the new account (default: its source: kiro-ide, kiro-cli, amazon-q-cli)"
    )
    usage = account_commands.add_parser(
        "usage",
        help="credits used and left per account, from Amazon Q",
        description="Ask Amazon Q (getUsageLimits) for each account's plan, credits used and left, and when they reset.",
    )
    usage.add_argument("account", nargs="?", help="account id or label (default: every enabled account)")
    copy = account_commands.add_parser(
        "copy",
        help="copy accounts between stores: a data directory (SQLite) or a database URL",
        description=(
            "Copy accounts whole (id, label, enabled flag, newest tokens) from one store to another, e.g. from "
            "the SQLite store to a shared database before running several replicas. An account the target "
            "already has is skipped unless --replace. Shared stores are opened with Q2API_SECRET_KEY."
        ),
    )
    copy.add_argument("--from", dest="source", required=True, help="data directory or database URL to copy from")
    copy.add_argument("--to", dest="target", help="data directory or database URL (default: the configured store)")
    copy.add_argument("--replace", action="store_true", help="overwrite accounts the target already has")
    accounts.set_defaults(run=_accounts, group=accounts)

    login = commands.add_parser(
        "login",
        help="sign in with a device code (Builder ID or IAM Identity Center) and store the account",
        description=(
            "Device-code login: prints a URL and a code to confirm in a browser, waits for the approval, "
            "then stores the account (a running gateway serves it within seconds)."
        ),
    )
    login.add_argument(
        "--label",
        help="a name for the account; an account with this label gets the new login (default: the method, "
        "e.g. builder-id, or builder-id-2 when taken: never replaces an account)",
    )
    login.add_argument("--method", choices=["builder-id", "idc"], default="builder-id", help="default: builder-id")
    login.add_argument("--start-url", help="the IAM Identity Center start URL (method idc)")
    login.add_argument("--region", help="the Identity Center's AWS region (default: us-east-1)")
    login.set_defaults(run=_login)

    replay = commands.add_parser(
        "replay",
        help="run a capture of a failed request again (send it, or only convert it with this version)",
        description=(
            "Run a capture again. By default the captured Amazon Q request is sent with the configured account "
            "(a fresh token, never the captured one) to see whether Amazon Q still refuses it. --convert-only "
            "sends nothing: this version converts the captured client request and says whether its findings "
            "are those captured. --diff shows how the Amazon Q request it builds differs from the captured one."
        ),
    )
    replay.add_argument("capture", metavar="FILE", help="a capture file, or a capture id / request id")
    replay.add_argument("--convert-only", action="store_true", help="convert with this version; send nothing")
    replay.add_argument(
        "--diff", action="store_true", help="diff this version's Amazon Q request with the captured one"
    )
    replay.set_defaults(run=_replay)

    captures = commands.add_parser(
        "captures",
        help="list, show or remove the capture files of failed requests",
        description="The capture files in Q2API_CAPTURE_DIR (default: captures inside Q2API_DATA_DIR).",
    )
    capture_commands = captures.add_subparsers(dest="captures_command", metavar="COMMAND")
    listing = capture_commands.add_parser(
        "list", help="every capture, newest first", description="List every capture file, newest first."
    )
    listing.add_argument("--json", action="store_true", help="the summaries as JSON")
    show = capture_commands.add_parser(
        "show",
        help="what one capture says: the failure, the findings, Amazon Q's answer",
        description="Show what one capture says: the failure, the conversion's findings and Amazon Q's answer.",
    )
    show.add_argument("capture", help="capture id (or its start), request id, or path")
    show.add_argument("--json", action="store_true", help="the whole capture file")
    remove = capture_commands.add_parser(
        "rm", help="remove captures", description="Remove the captures named, or every capture with --all."
    )
    remove.add_argument("captures", nargs="*", help="capture ids (or their start) or request ids")
    remove.add_argument("--all", action="store_true", help="remove every capture")
    captures.set_defaults(run=_captures, group=captures)

    from q2api.cli.keys import add_keys_parser
    from q2api.cli.probe import add_probe_parser
    from q2api.cli.usage import add_usage_parser

    add_keys_parser(commands)
    add_usage_parser(commands)
    add_probe_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    group: argparse.ArgumentParser | None = getattr(args, "group", None)
    if group is not None and getattr(args, f"{args.command}_command", None) is None:
        group.print_help()  # `q2api accounts` alone: what it can do, as `q2api` alone
        return 0
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
