"""Logging with loguru: one sink, text or JSON, and stdlib loggers (uvicorn, aiohttp) routed into it."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

import orjson
from loguru import logger

from q2api.log_text import one_line

if TYPE_CHECKING:
    from loguru import Message, Record

_PREFIX = "<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <7}</level> |"
TEXT_FORMAT = _PREFIX + " {message}{extra[fields]}\n{exception}"
# A message of several lines (the conversion debug summary) keeps every line whole: the prefix and
# the fields stand on a line of their own above it, never inside the block.
BLOCK_FORMAT = _PREFIX + "{extra[fields]}\n{message}\n{exception}"


def text_format(record: Record) -> str:
    return BLOCK_FORMAT if "\n" in record["message"] else TEXT_FORMAT


def _render_fields(record: Record) -> bool:
    """Append the bound fields as `key=value` pairs after the message (text format only)."""
    extra = record["extra"]
    fields = {key: value for key, value in extra.items() if key != "fields"}
    # Field values are often the client's (model, path): escaped, so none can start a forged line.
    extra["fields"] = "".join(f" {key}={one_line(value)}" for key, value in fields.items())
    return True


# Keys every JSON line starts with; a bound field of the same name is kept as `field_<name>`.
JSON_BASE_KEYS = ("time", "level", "message", "logger")


class JsonLineSink:
    """One flat JSON object per line: `time`, `level`, `message`, `logger`, then the bound fields.

    Log tools (Loki, Elasticsearch, jq) read `request_id` or `status` at the top
    level, instead of loguru's nested `{"text", "record": {"extra": {...}}}`.
    A traceback, if any, is the `exception` field (rendered without local
    variables, like the text format).
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, message: Message) -> None:
        record = message.record
        line: dict[str, Any] = {
            "time": record["time"].isoformat(timespec="milliseconds"),
            "level": record["level"].name,
            "message": record["message"],
            "logger": record["name"],
        }
        for key, value in record["extra"].items():
            line[f"field_{key}" if key in line or key == "exception" else key] = value
        if record["exception"] is not None:
            # The sink's format is empty, so what loguru rendered is the traceback alone.
            line["exception"] = str(message).strip()
        self._stream.write(orjson.dumps(line, default=str).decode() + "\n")
        self._stream.flush()


class _InterceptHandler(logging.Handler):
    """Forward stdlib logging records to loguru so every line has one format."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


def add_text_sink(stream: TextIO, level: str = "INFO") -> int:
    """The text sink on `stream` (stderr in production); returns loguru's handler id."""
    return logger.add(
        stream,
        level=level.upper(),
        format=text_format,
        filter=_render_fields,
        backtrace=False,
        # diagnose=False: tracebacks never print local variables, which could hold tokens.
        diagnose=False,
    )


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    logger.remove()
    if fmt == "json":
        logger.add(JsonLineSink(sys.stderr), level=level.upper(), format="", backtrace=False, diagnose=False)
    else:
        add_text_sink(sys.stderr, level)
    # The stdlib root logger at the configured level, not 0: uvicorn checks whether TRACE is
    # enabled and, if so, wraps the app in a middleware that logs every ASGI message.
    logging.basicConfig(handlers=[_InterceptHandler()], level=logger.level(level.upper()).no, force=True)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "aiohttp"):
        logging.getLogger(name).handlers = [_InterceptHandler()]
        logging.getLogger(name).propagate = False
    # One INFO line per request comes from q2api itself; uvicorn's access line would repeat it.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
