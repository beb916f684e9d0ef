"""A thread that dies of an uncaught exception (Vectide's or a library's) is logged as a
structured error record, naming the thread, not left to Python's bare stderr traceback."""

from __future__ import annotations

import logging
import threading

import pytest

from vectide.services.common import logs


def crash(exc: BaseException) -> None:
    raise exc


def test_an_uncaught_exception_in_a_thread_is_an_error_record(caplog, monkeypatch):
    monkeypatch.setattr(threading, "excepthook", logs.log_thread_exception)
    with caplog.at_level(logging.ERROR, logger="vectide.threads"):
        thread = threading.Thread(target=crash, args=(ValueError("boom"),), name="zk-loop")
        thread.start()
        thread.join()
    [record] = caplog.records
    assert (record.thread_name, record.error) == ("zk-loop", "ValueError")
    line = logs.KeyValueFormatter().format(record)
    assert line.splitlines()[0].endswith(
        'msg="thread ended by an uncaught exception" thread_name=zk-loop error=ValueError'
    )
    assert "ValueError: boom" in line  # the traceback follows the record's line


@pytest.mark.parametrize("exc", [SystemExit(0), SystemExit(3)])
def test_a_thread_that_exits_is_not_an_error(caplog, monkeypatch, exc):
    monkeypatch.setattr(threading, "excepthook", logs.log_thread_exception)
    with caplog.at_level(logging.ERROR, logger="vectide.threads"):
        thread = threading.Thread(target=crash, args=(exc,))
        thread.start()
        thread.join()
    assert not caplog.records
