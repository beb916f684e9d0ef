"""Index builds on flushed segments, without S3: a dict store and a real DataCoord."""

import numpy as np

from tests.fakes import DictStore
from vectide.services.common import binlog
from vectide.services.common.kv import MemoryKV
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import (
    DataType,
    FieldColumn,
    InsertMsg,
    TimeTickMsg,
)
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
    IndexInfo,
)
from vectide.services.common.segment import SegmentState
from vectide.services.datacoord.core import DataCoord
from vectide.services.indexnode.core import IndexBuilder, TaskState, segment_vectors
from vectide.services.querynode.sealed import load_sealed
from vectide.streaming.flush import Record, process_batch

VCH = "c-dml_0_7v0"


class Collections:
    def __init__(self, info):
        self.infos = [info]

    def show_collections(self):
        return self.infos


def collection(index_type="HNSW", metric="L2", dim=8):
    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "v", DataType.FLOAT_VECTOR, dim=dim),
        ],
    )
    return CollectionInfo(
        7,
        "c",
        schema,
        1,
        [VCH],
        ["c-dml_0"],
        ConsistencyLevel.STRONG,
        1,
        {"c-dml_0": 0},
        indexes=[IndexInfo(55, "v", "v", index_type, metric)],
    )


def flushed_segment(store, rows=2000, dim=8):
    counter = iter(range(1, 10**6))
    dc = DataCoord(MemoryKV(), lambda: next(counter), lambda: 9)
    seg = dc.assign_segment(7, 1, VCH, rows)
    vectors = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    ids = np.arange(rows)
    msgs = [
        InsertMsg(
            1,
            3,
            0,
            7,
            1,
            seg,
            VCH,
            ids[i : i + 500],
            np.zeros(500, np.int64),
            np.full(500, 3, np.int64),
            [FieldColumn(101, "v", DataType.FLOAT_VECTOR, vectors[i : i + 500], dim)],
        )
        for i in range(0, rows, 500)
    ]
    _, flush_ts = dc.flush(7)
    records = [Record("c-dml_0", i, codec.encode(m)) for i, m in enumerate(msgs)]
    records.append(Record("c-dml_0", len(msgs), codec.encode(TimeTickMsg(0, flush_ts, 0))))
    dc.save_batch(process_batch(records, store)[0])
    return dc, seg, vectors


def test_builds_an_index_file_per_flushed_segment_and_marks_it_indexed():
    store = DictStore()
    dc, seg, vectors = flushed_segment(store)
    builder = IndexBuilder(dc, Collections(collection()), store)
    assert builder.run_once() == 1
    assert builder.run_once() == 0  # done once
    assert builder.state(seg, 55) == TaskState.FINISHED
    segment = dc.segment(seg)
    assert segment.state == SegmentState.INDEXED
    assert segment.index_files["55"] == binlog.index_file_key(55, seg)
    np.testing.assert_array_equal(segment_vectors(segment, 101, 8, store)[0], vectors)
    assert dc.index_progress(7, 55, True) == (2000, 2000, 0)
    # a query node loading the segment takes the file: its one chunk is indexed at once
    sealed = load_sealed(collection(), segment, store, chunk_rows=16384)
    assert sealed.indexes["v"].indexed_rows == 2000


def test_failed_builds_are_retried_then_reported_failed():
    store = DictStore(fail_index_puts=5)
    dc, seg, _ = flushed_segment(store)
    builder = IndexBuilder(dc, Collections(collection()), store, max_attempts=3)
    for _ in range(3):
        assert builder.run_once() == 0
    assert builder.state(seg, 55) == TaskState.FAILED
    assert dc.index_progress(7, 55, True) == (2000, 0, 2000)


def test_flat_needs_no_file_and_dropped_indexes_are_recycled():
    store = DictStore()
    dc, _, _ = flushed_segment(store)
    info = collection()
    collections = Collections(info)
    builder = IndexBuilder(dc, collections, store)
    builder.run_once()
    assert store.list("index_files/55/")
    info.indexes = [IndexInfo(56, "v", "v", "FLAT", "L2")]
    assert builder.run_once() == 0
    assert builder.recycle() == 1
    assert store.list("index_files/") == []


def test_a_query_node_takes_index_files_that_arrive_after_the_handoff():
    from vectide.services.querynode.core import QueryNode

    store = DictStore()
    dc, seg, _ = flushed_segment(store)
    node = QueryNode(1, binlogs=store)
    node.watch(collection(), VCH)
    assert node.load_segment(VCH, dc.segment(seg))  # handed off before any index file
    sealed = node._shards[VCH].sealed[seg]
    assert sealed.indexes["v"].indexed_rows == 0  # searched exactly meanwhile
    IndexBuilder(dc, Collections(collection()), store).run_once()
    assert node.load_segment(VCH, dc.segment(seg))
    assert sealed.indexes["v"].indexed_rows == 2000
    assert not node.load_segment(VCH, dc.segment(seg))


def test_a_sealed_segment_waiting_for_its_file_is_searched_through_an_interim_stand_in():
    import faiss

    from vectide.services.common.msgstream.message import MsgPack
    from vectide.services.common.requests import ShardSearchRequest
    from vectide.services.querynode.core import QueryNode

    store = DictStore()
    dc, seg, _ = flushed_segment(store)
    node = QueryNode(1, binlogs=store, chunk_rows=500)
    node.watch(collection(), VCH)
    assert node.load_segment(VCH, dc.segment(seg))
    sealed = node._shards[VCH].sealed[seg]
    assert node.build_pending_indexes() == 1  # the stand-in: one IVF over the 2,000 rows
    [stand_in] = sealed.indexes["v"].built()
    assert isinstance(stand_in, faiss.IndexIVFFlat) and sealed.indexes["v"].provisional
    assert node.build_pending_indexes() == 0
    node.apply(VCH, MsgPack(0, 2**62, [], {}))  # tsafe past every row
    vectors, _ = sealed.index_input("v", 0, 5)
    hits = node.search(ShardSearchRequest(7, [VCH], "v", vectors, "L2", 1, 0, 0.1))
    assert hits.pks.tolist() == sealed.pks()[:5].tolist()  # each row finds itself
    IndexBuilder(dc, Collections(collection()), store).run_once()
    assert node.load_segment(VCH, dc.segment(seg))  # the file replaces the stand-in
    [file_index] = sealed.indexes["v"].built()
    assert isinstance(file_index, faiss.IndexHNSWFlat) and not sealed.indexes["v"].provisional
    hits = node.search(ShardSearchRequest(7, [VCH], "v", vectors, "L2", 1, 0, 0.1))
    assert hits.pks.tolist() == sealed.pks()[:5].tolist()
