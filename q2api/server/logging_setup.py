"""Logging with loguru: one sink, text or JSON, and stdlib loggers (uvicorn, aiohttp) routed into it."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from loguru import logger

if TYPE_CHECKING:
    from loguru import Record

TEXT_FORMAT = "<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <7}</level> | {message}{extra[fields]}"


def _render_fields(record: Record) -> bool:
    """Append the bound fields as `key=value` pairs after the message (text format only)."""
    extra = record["extra"]
    fields = {key: value for key, value in extra.items() if key != "fields"}
    extra["fields"] = "".join(f" {key}={value}" for key, value in fields.items())
    return True


class _InterceptHandler(logging.Handler):
    """Forward stdlib logging records to loguru so every line has one format."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    logger.remove()
    if fmt == "json":
        logger.add(sys.stderr, level=level.upper(), serialize=True, backtrace=False, diagnose=False)
    else:
        logger.add(
            sys.stderr,
            level=level.upper(),
            format=TEXT_FORMAT,
            filter=_render_fields,
            backtrace=False,
            # diagnose=False: tracebacks never print local variables, which could hold tokens.
            diagnose=False,
        )
    # The stdlib root logger at the configured level, not 0: uvicorn checks whether TRACE is
    # enabled and, if so, wraps the app in a middleware that logs every ASGI message.
    logging.basicConfig(handlers=[_InterceptHandler()], level=logger.level(level.upper()).no, force=True)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "aiohttp"):
        logging.getLogger(name).handlers = [_InterceptHandler()]
        logging.getLogger(name).propagate = False
    # One INFO line per request comes from q2api itself; uvicorn's access line would repeat it.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
