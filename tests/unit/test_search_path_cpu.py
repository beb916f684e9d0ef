"""The search path's third pass keeps its answers: search params decoded once per distinct
set, reply columns filled in place, interceptors specialised per method, read slots, hits
flattened without a mask when every query is full."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from pymilvus.grpc_gen import milvus_pb2

from vectide.services.common.errors import MilvusError
from vectide.services.common.metrics import PROXY_ROWS
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.results import SearchHits
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.proxy import convert, grpc_search
from vectide.services.proxy.dql import Outputs
from vectide.services.proxy.grpc_auth import CURRENT_USER, AuthInterceptor
from vectide.services.proxy.interceptor import _observed
from vectide.services.proxy.task_scheduler import Task, TaskScheduler
from vectide.services.querynode import reads


def pairs(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(values.items())


def test_search_params_are_decoded_once_per_distinct_set_and_bad_ones_raise_every_time():
    first = grpc_search._decoded_params(
        pairs(topk="5", offset="2", metric_type="L2", params='{"ef": 32}', anns_field="v")
    )
    again = grpc_search._decoded_params(
        pairs(topk="5", offset="2", metric_type="L2", params='{"ef": 32}', anns_field="v")
    )
    assert again is first
    assert (first.limit, first.offset, first.round_decimal) == (5, 2, -1)
    assert (first.metric_type, first.anns_field, first.search_params) == ("L2", "v", {"ef": 32})
    assert (first.group_by, first.group_size) == ("", 1)
    grouped = grpc_search._decoded_params(pairs(group_by_field="n", group_size="3"))
    assert (grouped.group_by, grouped.group_size, grouped.limit) == ("n", 3, 10)
    for _ in range(2):
        with pytest.raises(MilvusError, match="topk"):
            grpc_search._decoded_params(pairs(topk="many"))


def schema_info() -> CollectionInfo:
    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=2),
            FieldSchema(102, "n", DataType.INT32),
        ],
    )
    return CollectionInfo(1, "c", schema, 1, ["v0"], ["p0"], ConsistencyLevel.BOUNDED, 1)


def test_reply_columns_filled_in_place_are_those_field_data_builds():
    info = schema_info()
    hits = SearchHits(
        "L2", [2, 1], np.array([7, 8, 9]), np.array([0.5, 1.5, 0.25], np.float32),
        {"n": np.array([70, 80, 90], np.int32)},
    )  # fmt: skip
    reply = convert.search_results(info, hits, Outputs(["n"], ["n", "id"], pk=True), 2)
    columns = list(reply.results.fields_data)
    schema = info.schema
    assert columns == [
        convert.field_data(schema.field("n"), hits.fields["n"]),
        convert.field_data(schema.primary, hits.pks),
    ]
    assert list(columns[1].scalars.long_data.data) == [7, 8, 9]
    with pytest.raises(MilvusError, match="output field m was not fetched"):
        convert.search_results(info, hits, Outputs(["m"], ["m"], pk=False), 2)


def test_an_unknown_consistency_level_is_refused():
    assert convert.consistency_level(2) is ConsistencyLevel.BOUNDED
    with pytest.raises(MilvusError, match="unknown consistency level 9"):
        convert.consistency_level(9)


class Context:
    def code(self):
        return None


def test_only_a_method_answering_mutation_results_counts_rows():
    mutation = milvus_pb2.MutationResult(insert_cnt=3)
    inserts = _observed("Insert", lambda request, context: mutation)
    searches = _observed("Search", lambda request, context: milvus_pb2.SearchResults())
    counter = PROXY_ROWS.labels("insert")
    before = counter._value.get()
    for _ in range(2):
        inserts(None, Context())
        searches(None, Context())
    assert counter._value.get() - before == 6


def test_without_authorization_a_call_runs_as_the_anonymous_caller():
    seen = []
    interceptor = AuthInterceptor(None)
    handler = interceptor._guarded(
        "Search", lambda request, context: seen.append(CURRENT_USER.get())
    )
    handler(None, None)
    token = CURRENT_USER.set("alice")  # a caller's user never leaks into an unguarded call
    try:
        handler(None, None)
        assert CURRENT_USER.get() == "alice"
    finally:
        CURRENT_USER.reset(token)
    assert seen == ["", ""]


class Read(Task):
    queue = "dq"

    def __init__(self, gate: threading.Event, running: list[int], fail: bool = False) -> None:
        self.gate, self.running, self.fail = gate, running, fail

    def execute(self) -> None:
        self.running.append(1)
        try:
            self.gate.wait(5)
            if self.fail:
                raise RuntimeError("read failed")
        finally:
            self.running.pop()


def test_reads_run_at_most_max_reads_at_once_and_a_failed_read_gives_its_slot_back():
    scheduler = TaskScheduler(lambda: 1, SimpleNamespace(), max_reads=2)
    gate, running = threading.Event(), []
    with pytest.raises(RuntimeError):
        gate.set()
        scheduler.run(Read(gate, running, fail=True))
    gate.clear()
    threads = [
        threading.Thread(target=scheduler.run, args=(Read(gate, running),)) for _ in range(3)
    ]
    for t in threads:
        t.start()
    time.sleep(0.3)
    assert len(running) == 2  # the third waits for a slot (the failed read gave its back)
    gate.set()
    for t in threads:
        t.join(5)
    assert running == []


class Store:
    """A store whose search answers fixed rows (-1: no row) and scores."""

    def __init__(self, rows: list[list[int]], scores: list[list[float]]) -> None:
        self._rows = np.array(rows, np.int64)
        self._scores = np.array(scores, np.float32)

    def search(self, *args):
        return self._scores, self._rows

    def pks(self):
        return np.array([10, 11, 12, 13], np.int64)


def search(store: Store, nq: int) -> SearchHits:
    req = ShardSearchRequest(1, ["v0"], "vec", np.zeros((nq, 2), np.float32), "L2", 2, 5, 1.0)
    return reads.search_store(store, req, None, None, 5, mask=np.ones(4, bool))


def test_full_queries_and_short_ones_give_the_same_hits_as_the_mask():
    full = search(Store([[2, 0], [3, 1]], [[0.1, 0.2], [0.3, 0.4]]), 2)
    assert full.counts == [2, 2] and full.pks.tolist() == [12, 10, 13, 11]
    assert full.scores.dtype == np.float32 and full.scores.tolist() == pytest.approx(
        [0.1, 0.2, 0.3, 0.4]
    )
    short = search(Store([[2, -1], [3, 1]], [[0.1, 3e38], [0.3, 0.4]]), 2)
    assert short.counts == [1, 2] and short.pks.tolist() == [12, 13, 11]
    assert short.scores.tolist() == pytest.approx([0.1, 0.3, 0.4])
