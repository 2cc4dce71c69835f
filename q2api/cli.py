"""`q2api serve | demo | accounts …` — the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from q2api.log_setup import configure_logging
    from q2api.settings import load_settings

    settings = load_settings()  # fail fast, before uvicorn starts, on a bad setting
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.run(
        "q2api.app:app_from_environment",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from q2api.demo import run_demo

    return run_demo()


def _accounts(args: argparse.Namespace) -> int:
    from q2api.accounts_cli import run_accounts_command

    return run_accounts_command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="q2api", description="Claude Messages API gateway for Amazon Q / Kiro")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="worker processes sharing one data dir")
    serve.set_defaults(run=_serve)

    demo = commands.add_parser("demo", help="run one request end to end against a simulated Amazon Q")
    demo.set_defaults(run=_demo)

    accounts = commands.add_parser("accounts", help="manage the Amazon Q accounts in the store")
    account_commands = accounts.add_subparsers(dest="accounts_command", required=True)
    account_commands.add_parser("list", help="list accounts (secrets are never printed)")
    add = account_commands.add_parser("add", help="add an account")
    add.add_argument("--label", required=True)
    add.add_argument("--auth-method", choices=["idc", "social"], default=None)
    add.add_argument("--refresh-token", help="prefer the Q2API_NEW_REFRESH_TOKEN env var: argv is visible to other users")
    add.add_argument("--client-id")
    add.add_argument("--client-secret", help="prefer the Q2API_NEW_CLIENT_SECRET env var")
    add.add_argument("--profile-arn")
    remove = account_commands.add_parser("remove", help="remove an account")
    remove.add_argument("account", help="account id or label")
    accounts.set_defaults(run=_accounts)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
