"""Structured, quiet-by-default logging: one ``key=value`` line per event.

``VECTIDE_LOG_LEVEL`` sets the level (default WARNING); anything passed as ``extra=`` to a
log call is appended as fields, so logs stay greppable and machine-parsable.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        line = " ".join(f"{k}={_quote(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _quote(value: object) -> str:
    text = str(value)
    return f'"{text}"' if (" " in text or not text) else text


def configure(level: str | None = None) -> None:
    level = (level or os.environ.get("VECTIDE_LOG_LEVEL") or "WARNING").upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("kazoo", "botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    threading.excepthook = log_thread_exception


def log_thread_exception(args: threading.ExceptHookArgs) -> None:
    """A thread ended by an exception nobody caught (ours, or a library's own: kazoo's
    connection thread when ZooKeeper refuses a login) is an error record like any other,
    with the thread's name, instead of Python's bare traceback on stderr."""
    if issubclass(args.exc_type, SystemExit):
        return
    logging.getLogger("vectide.threads").error(
        "thread ended by an uncaught exception",
        extra={
            "thread_name": args.thread.name if args.thread else "",
            "error": args.exc_type.__name__,
        },
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
