"""What query node stores hold in memory: a sealed segment keeps its vectors once (in its
index), a handoff frees the growing copy, and the process gives freed memory back."""

import gc
import os

import numpy as np
import pytest

from tests.fakes import DictStore
from tests.unit.test_indexnode import VCH, Collections, collection, flushed_segment
from vectide.services.common.memory import release_freed
from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
from vectide.services.indexnode.core import IndexBuilder
from vectide.services.querynode.chunk_index import BuiltChunks
from vectide.services.querynode.core import QueryNode
from vectide.services.querynode.sealed import load_sealed


def indexed_segment(index_type, metric="L2", rows=2000, dim=8):
    store = DictStore()
    dc, seg, vectors = flushed_segment(store, rows, dim)
    info = collection(index_type, metric, dim)
    assert IndexBuilder(dc, Collections(info), store).run_once() == 1
    return info, dc.segment(seg), store, vectors


@pytest.mark.parametrize("index_type", ["HNSW", "IVF_FLAT"])
def test_a_sealed_segment_reads_its_vectors_from_its_index(index_type):
    info, segment, store, vectors = indexed_segment(index_type)
    sealed = load_sealed(info, segment, store, chunk_rows=16384)
    held = sealed.held_bytes()
    assert held["vectors"] == 0  # no column beside the index's copy
    assert held["vector_index"] >= vectors.nbytes
    rows = np.array([0, 7, 1999, 7])
    np.testing.assert_array_equal(sealed.output("v", rows), vectors[rows])
    mask = np.ones(sealed.num_rows, dtype=bool)
    _, hits = sealed.search("v", vectors[[5, 1500]], "L2", 3, mask, {"ef": 64, "nprobe": 128})
    assert hits[:, 0].tolist() == [5, 1500]
    # another metric than the index's: exact search over the index's vectors
    scores, hits = sealed.search("v", vectors[[42]], "IP", 1, mask)
    best = vectors @ vectors[42]
    assert hits[0, 0] == int(np.argmax(best))
    assert scores[0, 0] == pytest.approx(best.max(), rel=1e-5)


def test_cosine_and_unindexed_segments_keep_their_column():
    info, segment, store, vectors = indexed_segment("HNSW", "COSINE")
    sealed = load_sealed(info, segment, store, chunk_rows=16384)
    assert sealed.indexes["v"].indexed_rows == 2000
    assert sealed.held_bytes()["vectors"] == vectors.nbytes  # the index holds normalised ones
    np.testing.assert_array_equal(sealed.output("v", np.arange(3)), vectors[:3])
    segment.index_files.clear()
    plain = load_sealed(collection("HNSW"), segment, store, chunk_rows=16384)
    assert plain.held_bytes()["vectors"] == vectors.nbytes  # sized once: no room grown ahead


def growing_rows(segment_id, vectors, first=0):
    n = len(vectors)
    ids = np.arange(first, first + n)
    return InsertMsg(
        1,
        3,
        0,
        7,
        1,
        segment_id,
        VCH,
        ids,
        np.zeros(n, np.int64),
        np.full(n, 3, np.int64),
        [FieldColumn(101, "v", DataType.FLOAT_VECTOR, vectors, vectors.shape[1])],
    )


def test_a_handoff_frees_the_growing_copy():
    store = DictStore()
    dc, seg, vectors = flushed_segment(store, rows=3000)
    node = QueryNode(1, binlogs=store, chunk_rows=1024)
    node.watch(collection(), VCH)
    shard = node._shards[VCH]
    shard.store.insert(growing_rows(seg, vectors))
    while node.build_pending_indexes():
        pass
    assert shard.store.held_bytes()["vector_index"] > 0  # two chunks indexed, a tail not
    before = node.held_bytes()
    assert before[("growing", "vectors")] >= vectors.nbytes
    assert node.load_segment(VCH, dc.segment(seg))
    after = node.held_bytes()
    # every row was handed off: the unindexed tail too, and the interim indexes
    assert shard.store.num_rows == 0
    assert after[("growing", "vectors")] < 1024 * 8 * 4
    assert after[("growing", "vector_index")] == 0
    assert after[("sealed", "vectors")] == vectors.nbytes  # no index file yet: a column


def rss() -> int:
    """This process's resident bytes (Linux; psutil is a bench extra, not a test one)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_rows_handed_off_leave_the_process():
    """RSS after a handoff holds the rows once (the sealed copy), not growing and sealed."""
    store = DictStore()
    dc, seg, vectors = flushed_segment(store, rows=200_000, dim=128)  # 100 MiB of vectors
    node = QueryNode(1, binlogs=store)
    node.watch(collection("FLAT", dim=128), VCH)
    gc.collect()
    release_freed()
    start = rss()
    for first in range(0, len(vectors), 5000):
        node._shards[VCH].store.insert(growing_rows(seg, vectors[first : first + 5000], first))
    grown = rss() - start
    assert grown >= 0.9 * vectors.nbytes
    assert node.load_segment(VCH, dc.segment(seg))
    gc.collect()
    held = rss() - start
    print(f"{grown / 2**20:.0f} MiB grown, {held / 2**20:.0f} MiB held after the handoff")
    assert held < 1.35 * vectors.nbytes, f"{held / 2**20:.0f} MiB held after the handoff"


def test_an_interim_index_built_from_freed_rows_is_not_installed():
    chunks = BuiltChunks(chunk_rows=4)
    assert chunks.next_chunk(10) == 0  # a builder takes chunk 0 ...
    chunks.drop_head(2)  # ... while a handoff frees every row
    chunks.install(0, "index of freed rows")
    assert chunks.built() == []
    assert chunks.next_chunk(4) == 0  # the new rows' chunk 0 is built again
    chunks.install(0, "index of new rows")
    chunks.install(0, "late duplicate")
    assert chunks.built() == ["index of new rows"]


def test_parsed_json_and_geometry_rows_count_what_they_hold():
    """A store reads JSON documents and geometries once and keeps them beside their text:
    the column's estimate counts each parsed row's objects (measured: tracemalloc for JSON),
    not a pointer's 8 bytes."""
    import json
    import tracemalloc

    from vectide.services.common import geometry
    from vectide.services.querynode.columns import ObjectColumn, json_bytes, json_documents

    texts = [
        json.dumps({"user": {"id": i * 1000, "tags": ["red", "blue"], "score": i / 3}, "ok": True})
        for i in range(5_000)
    ]
    column = ObjectColumn(json_documents, json_bytes)
    column.append(texts)
    unread = column.nbytes
    tracemalloc.start()
    column.view()
    parsed, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert 0.75 * parsed < column.nbytes - unread < 1.25 * parsed
    shapes = ObjectColumn(lambda rows: list(geometry.column(rows)), geometry.memory_bytes)
    shapes.append(["POINT (1 2)", "POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))", ""])
    unread = shapes.nbytes
    shapes.view()
    assert shapes.nbytes - unread == (8 + 200) + (8 + 408) + (8 + 16)
