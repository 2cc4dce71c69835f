"""`q2api replay FILE [--convert-only] [--diff]`: run a capture again.

- Without `--convert-only`, the captured Amazon Q request is sent again with the configured account
  (a token of its own, refreshed as the gateway would — never anything from the capture) to see
  whether Amazon Q still refuses it. Its images carry same-size placeholder images, its profileArn
  is the account's own. Exit status 0 when Amazon Q answers, 1 when it refuses.
- `--convert-only` sends nothing: the current version converts the captured client request (with
  the model, conversation id and guard settings the capture recorded) and prints its
  `DEBUG_MESSAGE_CONVERSION` block, then whether its findings are those captured.
- `--diff` also prints how the Amazon Q request the current version builds differs from the one
  captured (a unified diff; images and documents appear as their placeholders on both sides).

FILE is a path, or a capture of `Q2API_CAPTURE_DIR` by id, start of id, or request id.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from q2api.accounts.opening import opened_account_store
from q2api.accounts.pool import build_account_pool
from q2api.amazonq.errors import UpstreamError, UpstreamHTTPError
from q2api.amazonq.upstream import UpstreamClient
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.message_aggregator import MessageAggregator
from q2api.cli.captures import configured_store, read_capture
from q2api.cli.terminal import echo
from q2api.conversion.debug_summary import conversion_summary
from q2api.conversion.normalization import normalization_record
from q2api.server.captures.document import finding_keys
from q2api.server.captures.replaying import LoadedCapture, NotACapture, Reconversion
from q2api.server.wiring import env_account, refresh_endpoints, upstream_config, upstream_session
from q2api.settings import Settings, SettingsError, load_settings
from q2api.translation.pump import ReplyPump
from q2api.translation.translator import StreamTranslator

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def run_replay(args: argparse.Namespace) -> int:
    found = read_capture(configured_store(), args.capture)
    if found is None:
        echo(f"q2api replay: no capture {args.capture!r} (a path, or see `q2api captures list`)", file=sys.stderr)
        return EXIT_USAGE
    path, document = found
    try:
        capture = LoadedCapture(document)
    except NotACapture as exc:
        echo(f"q2api replay: {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    echo(f"capture {capture.summary.get('id')} ({', '.join(map(str, capture.summary.get('reasons') or ()))})")
    status = EXIT_OK
    if args.convert_only or args.diff:
        try:
            reconversion = capture.reconvert()
        except NotACapture as exc:
            echo(f"q2api replay: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.convert_only:
            _print_conversion(capture, reconversion)
        if args.diff:
            difference = capture.diff(reconversion)
            echo(difference or "The Amazon Q request the current version builds is the one captured.")
    if not args.convert_only:
        try:
            settings = load_settings()
        except SettingsError as exc:
            echo(f"q2api: {exc}", file=sys.stderr)
            return EXIT_USAGE
        body = capture.upstream_body()
        if body is None:
            echo("q2api replay: the capture holds no Amazon Q request (nothing was sent); try --convert-only")
            return EXIT_USAGE
        status = asyncio.run(_send(settings, body))
    return status


def _print_conversion(capture: LoadedCapture, reconversion: Reconversion) -> None:
    if reconversion.error is not None:
        echo(f"The current version refuses the request: {reconversion.error.status} {reconversion.error.message}")
    guarded = reconversion.guarded
    if guarded is not None and guarded.conversion is not None:
        count = int(capture.conversion_view.get("claude_messages") or 0)
        echo(conversion_summary(count, guarded.conversion, (*guarded.loop_findings, *guarded.invalid)))
        record = normalization_record(count, guarded.conversion)
        if record is not None:
            echo(record.line())
    elif guarded is not None:
        for finding in guarded.loop_findings:
            echo(finding.line())
        if guarded.refusal is not None:
            echo(f"refused: {guarded.refusal.message}")
    if capture.same_findings(reconversion):
        echo(f"Same findings as when captured ({len(capture.captured_findings)}).")
        return
    captured, current = finding_keys(capture.captured_findings), finding_keys(reconversion.findings)
    echo("The findings differ from those captured:")
    for key in captured:
        if key not in current:
            echo(f"  - captured only: [{key[0]}] {key[1]} message={key[2]} tool={key[3]}")
    for key in current:
        if key not in captured:
            echo(f"  + now:           [{key[0]}] {key[1]} message={key[2]} tool={key[3]}")


async def _send(settings: Settings, body: dict[str, Any]) -> int:
    opened = opened_account_store(settings.database_url, settings.data_dir, settings.secret_key)
    async with opened as store, upstream_session() as session:
        pool = await build_account_pool(
            store, session, endpoints=refresh_endpoints(settings), seed=env_account(settings)
        )
        client = UpstreamClient(session, pool, upstream_config(settings))
        echo(f"sending the captured Amazon Q request to {settings.endpoint or 'the account’s hosts'} …")
        try:
            async with client.open_stream(body) as stream:  # type: ignore[arg-type]
                translator = StreamTranslator(
                    model=str(body["conversationState"]["currentMessage"]["userInputMessage"].get("modelId", "-"))
                )
                pump = ReplyPump(stream.chunks(), translator, stream.buffered)
                aggregator = MessageAggregator()
                aggregator.add_all(translator.start())
                while not pump.finished:
                    aggregator.add_all(await pump.read() or ())
                echo(f"Amazon Q answered 200 (request id {stream.request_id or '-'}, account {stream.account_label}).")
        except UpstreamHTTPError as error:
            echo(f"Amazon Q refused it again: HTTP {error.status} {error.code or ''} {error.reason or ''}".rstrip())
            echo(f"  {error.message}  (request id {error.request_id or '-'})")
            return EXIT_REFUSED
        except UpstreamError as error:
            echo(f"q2api replay: no answer from Amazon Q: {error}", file=sys.stderr)
            return EXIT_REFUSED
    if pump.failure is not None:
        echo(f"The reply failed on the way: {pump.failure.message}")
        return EXIT_REFUSED
    try:
        message = aggregator.message()
    except AnthropicError as error:
        echo(f"The reply did not finish: {error.message}")
        return EXIT_REFUSED
    for block in message.get("content") or ():
        if block.get("type") == "text":
            echo(f"text: {block['text'][:500]}")
        elif block.get("type") == "tool_use":
            echo(f"tool call: {block['name']}")
    echo(f"stop_reason: {message.get('stop_reason')}")
    return EXIT_OK
