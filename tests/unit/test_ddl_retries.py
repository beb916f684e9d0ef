"""Retried DDL: a request sent again with its stamp (its request id) is answered from the
rootcoord's request log, never run twice; a proxy's DDL overtaken by another proxy's later
stamp is stamped again instead of failing."""

from __future__ import annotations

import itertools
import threading

import pytest

from tests.unit.test_rootcoord import root, schema  # noqa: F401 - the fixture
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.proxy.channels_time_ticker import ChannelsTimeTicker
from vectide.services.proxy.task_scheduler import DDL_ATTEMPTS, TaskScheduler
from vectide.services.rootcoord.ddl_requests import RequestLog


def test_a_repeated_create_collection_gets_the_first_answer(root):  # noqa: F811
    ts = root.alloc_timestamp()
    first = root.create_collection(ts, schema("a"), 1, ConsistencyLevel.STRONG)
    written = len(root._writer.written)
    again = root.create_collection(ts, schema("a"), 1, ConsistencyLevel.STRONG)
    assert again.collection_id == first.collection_id  # not "already exists"
    assert len(root._writer.written) == written  # no second DDL message
    with pytest.raises(MilvusError) as exists:  # a new request (new stamp) is refused
        root.create_collection(root.alloc_timestamp(), schema("a"), 1, ConsistencyLevel.STRONG)
    assert exists.value.code == Code.PARAMETER_INVALID


def test_a_repeated_drop_succeeds_and_its_own_errors_repeat(root):  # noqa: F811
    root.create_collection(root.alloc_timestamp(), schema("a"), 1, ConsistencyLevel.STRONG)
    ts = root.alloc_timestamp()
    root.drop_collection(ts, "a")
    root.drop_collection(ts, "a")  # the retry of a drop whose reply was lost: no "not found"
    missing = root.alloc_timestamp()
    for _ in range(2):
        with pytest.raises(MilvusError) as raised:
            root.drop_collection(missing, "nope")
        assert raised.value.code == Code.COLLECTION_NOT_FOUND


def test_a_transient_failure_is_not_remembered():
    log = RequestLog()
    calls = itertools.count()

    def flaky():
        if next(calls) == 0:
            raise MilvusError(Code.SERVICE_UNAVAILABLE, "writer down")
        return "done"

    with pytest.raises(MilvusError):
        log.run(7, flaky)
    assert log.run(7, flaky) == "done" and log.run(7, flaky) == "done"
    assert next(calls) == 2  # ran twice (once failing), then answered from the log


def test_a_retry_during_the_first_attempt_waits_for_its_outcome():
    log = RequestLog()
    started, release = threading.Event(), threading.Event()
    runs = []

    def slow():
        runs.append(1)
        started.set()
        release.wait(5)
        return "created"

    first = threading.Thread(target=log.run, args=(9, slow))
    first.start()
    started.wait(5)
    answers = []
    retry = threading.Thread(target=lambda: answers.append(log.run(9, slow)))
    retry.start()
    release.set()
    first.join(5)
    retry.join(5)
    assert answers == ["created"] and runs == [1]


def test_the_log_forgets_the_oldest_beyond_its_capacity():
    log = RequestLog(capacity=2)
    for stamp in (1, 2, 3):
        log.run(stamp, lambda: "x")
    assert log.run(1, lambda: "again") == "again"  # stamp 1 was forgotten


def scheduler() -> TaskScheduler:
    clock = itertools.count(100)
    return TaskScheduler(lambda: next(clock), ChannelsTimeTicker(["a"], lambda: next(clock)))


def test_the_proxy_stamps_an_overtaken_ddl_again():
    stamps = []

    def ddl(ts):
        stamps.append(ts)
        if len(stamps) < 3:
            raise MilvusError(Code.DDL_OUT_OF_ORDER, "older than the last executed DDL")
        return ts

    assert scheduler().ddl(ddl) == stamps[-1]
    assert len(stamps) == 3 and stamps == sorted(set(stamps))  # a fresh stamp each time


def test_the_proxy_gives_up_after_its_attempts_and_never_retries_other_errors():
    tries = []

    def always_overtaken(ts):
        tries.append(ts)
        raise MilvusError(Code.DDL_OUT_OF_ORDER, "overtaken")

    with pytest.raises(MilvusError):
        scheduler().ddl(always_overtaken)
    assert len(tries) == DDL_ATTEMPTS
    tries.clear()

    def invalid(ts):
        tries.append(ts)
        raise MilvusError(Code.PARAMETER_INVALID, "bad name")

    with pytest.raises(MilvusError):
        scheduler().ddl(invalid)
    assert len(tries) == 1
