"""The interim index of growing chunks: what it is, what searches it, and the recall it keeps
on clustered data (the bench's synthetic set) at its defaults."""

from __future__ import annotations

from dataclasses import replace

import faiss
import numpy as np
import pytest

from benchmarks import datasets
from tests.unit.test_querynode import VCH
from tests.unit.test_querynode import collection as one_shard_collection
from tests.unit.test_querynode import insert as one_shard_insert
from vectide.services.common.config import QueryConfig
from vectide.services.common.index_spec import (
    IndexSpec,
    InterimIndex,
    chunk_spec,
    interim_index,
    normalised,
)
from vectide.services.common.msgstream.message import DataType, FieldColumn, MsgPack
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.schema import CollectionInfo, CollectionSchema, FieldSchema, IndexInfo
from vectide.services.querynode.chunk_index import DEFAULT_CHUNK_ROWS, ChunkIndexes
from vectide.services.querynode.core import QueryNode

DIM = 128
HNSW = IndexInfo(1, "vec", "vec", "HNSW", "L2", {"M": "16", "efConstruction": "128"})


def collection(index: IndexInfo = HNSW) -> CollectionInfo:
    """test_querynode's one-shard collection, with 128-d vectors only."""
    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=DIM),
        ],
    )
    return replace(one_shard_collection(), schema=schema, indexes=[index])


def insert(vectors: np.ndarray, first_id: int, ts: int) -> MsgPack:
    """test_querynode's insert, of this schema's one vector field."""
    msg = one_shard_insert(np.arange(first_id, first_id + len(vectors)), ts, vectors)
    msg.fields = [FieldColumn(101, "vec", DataType.FLOAT_VECTOR, vectors, DIM)]
    return MsgPack(ts - 1, ts, [msg], {})


def recall_at_10(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)]))


def test_defaults_are_milvus_interim_index():
    """queryNode.segcore.interimIndex: nlist 128, nprobe 16 (IVF_FLAT_CC in Milvus)."""
    assert interim_index(QueryConfig()) == InterimIndex("IVF_FLAT", 128, 16)


@pytest.mark.parametrize(
    ("kind", "nlist", "nprobe", "named"),
    [("HNSW", 128, 16, "query.interim_index"), ("IVF_FLAT", 0, 16, "query.interim_nlist")],
)
def test_a_bad_setting_is_refused_by_name(kind, nlist, nprobe, named):
    with pytest.raises(ValueError, match=named):
        InterimIndex(kind, nlist, nprobe)


def test_growing_chunks_get_ivf_flat_whatever_the_collection_index():
    spec = chunk_spec(HNSW, InterimIndex())
    assert (spec.index_type, spec.metric, spec.params) == ("IVF_FLAT", "L2", {"nlist": "128"})
    assert chunk_spec(HNSW, InterimIndex("collection")) == IndexSpec.of(HNSW)
    assert chunk_spec(HNSW, None) == IndexSpec.of(HNSW)  # a sealed segment: its index file's


@pytest.mark.parametrize(
    ("asked", "probed"), [({}, 16), ({"ef": 64}, 16), ({"nprobe": 4}, 16), ({"nprobe": 48}, 48)]
)
def test_an_interim_search_probes_the_configured_lists_or_more(asked, probed):
    spec = chunk_spec(HNSW, InterimIndex())
    selector = faiss.IDSelectorAll()
    assert spec.search_params(selector, 10, asked).nprobe == probed
    plain = IndexSpec.of(IndexInfo(1, "vec", "vec", "IVF_FLAT", "L2", {"nlist": "128"}))
    assert plain.search_params(selector, 10, {}).nprobe == 16
    assert plain.search_params(selector, 10, {"nprobe": 4}).nprobe == 4  # collection's own


@pytest.fixture(scope="module")
def clustered() -> datasets.Dataset:
    """The bench's synthetic set: three 16k chunks and a 5,000-row tail."""
    return datasets.synthetic(3 * DEFAULT_CHUNK_ROWS + 5_000, DIM, 100, 10)


@pytest.fixture
def one_core():
    """As the query node service runs faiss (beside ingest and reads)."""
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


def test_interim_index_of_a_chunk_reaches_recall_095_on_clustered_data(clustered, one_core):
    chunk = clustered.vectors[:DEFAULT_CHUNK_ROWS]
    spec = chunk_spec(HNSW, InterimIndex())
    index = spec.build(chunk)
    assert isinstance(index, faiss.IndexIVFFlat) and index.nlist == 128
    params = spec.search_params(faiss.IDSelectorAll(), 10, {})
    _, found = index.search(clustered.queries, 10, params=params)
    truth = datasets.exact_neighbours(chunk, clustered.queries, 10, "L2")
    assert recall_at_10(found, truth) >= 0.95


def test_growing_shard_over_several_chunks_and_a_tail_keeps_recall_095(clustered, one_core):
    """Three indexed 16k chunks plus an exact tail, through the query node's search."""
    data, rows = clustered, clustered.rows
    node = QueryNode(1)
    node.watch(collection(), VCH)
    for ts, start in enumerate(range(0, rows, 10_000), start=2):
        node.apply(VCH, insert(data.vectors[start : start + 10_000], start, ts))
    while node.build_pending_indexes():
        pass
    indexes = node._shards[VCH].store.indexes["vec"]
    assert indexes.indexed_rows == 3 * DEFAULT_CHUNK_ROWS
    assert all(isinstance(i, faiss.IndexIVFFlat) for i in indexes.built())
    hits = node.search(
        ShardSearchRequest(
            7, [VCH], "vec", data.queries, "L2", 10, 7, 0.1, search_params={"ef": 64}
        )
    )
    found = np.asarray(hits.pks).reshape(len(data.queries), 10)
    assert recall_at_10(found, data.ground_truth) >= 0.95


def test_interim_collection_keeps_the_collection_index_for_growing_chunks():
    node = QueryNode(1, chunk_rows=500, interim=InterimIndex("collection"))
    node.watch(collection(), VCH)
    vectors = np.random.default_rng(3).random((600, DIM), np.float32)
    node.apply(VCH, insert(vectors, 0, 2))
    assert node.build_pending_indexes() == 1
    [built] = node._shards[VCH].store.indexes["vec"].built()
    assert isinstance(built, faiss.IndexHNSWFlat)
    # every row visible: the chunk is searched without an ID selector
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", vectors[:5], "L2", 1, 2, 0.1))
    assert hits.pks.tolist() == [0, 1, 2, 3, 4]


# -- merged blocks -------------------------------------------------------------------------

SMALL_CHUNK = 2_048


def merged_node(data: datasets.Dataset, chunk_rows: int = SMALL_CHUNK) -> QueryNode:
    """A growing shard of ``data``'s rows, every chunk built and every merge due made."""
    node = QueryNode(1, chunk_rows=chunk_rows)
    node.watch(collection(), VCH)
    for ts, start in enumerate(range(0, data.rows, 5_000), start=2):
        node.apply(VCH, insert(data.vectors[start : start + 5_000], start, ts))
    while node.build_pending_indexes():
        pass
    return node


def search_ids(node: QueryNode, queries: np.ndarray, ts: int) -> np.ndarray:
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", queries, "L2", 10, ts, 0.1))
    assert hits.counts == [10] * len(queries)
    return np.asarray(hits.pks).reshape(len(queries), 10)


@pytest.fixture(scope="module")
def nine_chunks() -> datasets.Dataset:
    """Nine 2,048-row chunks and a tail: blocks of 8,192, 8,192 and 2,048 rows."""
    return datasets.synthetic(9 * SMALL_CHUNK + 700, DIM, 100, 10)


def test_full_chunks_merge_level_by_level_with_more_lists(nine_chunks, one_core):
    node = merged_node(nine_chunks)
    indexes = node._shards[VCH].store.indexes["vec"]
    blocks = indexes.blocks()
    assert [(b.first, b.chunks, b.level) for b in blocks] == [(0, 4, 1), (4, 4, 1), (8, 1, 0)]
    # twice the lists per level, at most rows / 39: 8,192 rows 210 (of 256), 2,048 rows 52
    assert [b.index.nlist for b in blocks] == [210, 210, 52]
    assert [b.index.ntotal for b in blocks] == [4 * SMALL_CHUNK] * 2 + [SMALL_CHUNK]
    assert indexes.indexed_rows == 9 * SMALL_CHUNK
    assert indexes.next_merge() is None  # two level-1 blocks: not yet four


def test_merged_blocks_keep_recall_095_on_clustered_data(nine_chunks, one_core):
    found = search_ids(merged_node(nine_chunks), nine_chunks.queries, 5)
    assert recall_at_10(found, nine_chunks.ground_truth) >= 0.95


def test_merge_fanout_0_keeps_one_index_per_chunk(nine_chunks):
    assert chunk_spec(HNSW, InterimIndex(merge_fanout=0)).merge_fanout == 0
    assert chunk_spec(HNSW, InterimIndex("collection")).merge_fanout == 0  # HNSW: never
    assert IndexSpec.of(HNSW).merged(1).merge_fanout == 0
    with pytest.raises(ValueError, match=r"query\.interim_merge_fanout"):
        InterimIndex(merge_fanout=-1)


def test_merged_levels_double_lists_and_probe_more_every_third_level():
    spec = chunk_spec(HNSW, InterimIndex())
    assert [spec.merged(level).params["nlist"] for level in range(4)] == [
        "128",
        "256",
        "512",
        "1024",
    ]
    assert [spec.merged(level).min_nprobe for level in range(4)] == [16, 16, 16, 32]


def test_deleted_rows_never_come_back_from_a_merged_block(nine_chunks, one_core):
    """Each query's true nearest rows deleted: the blocks' selectors leave them out, and the
    next ones still come back (the exact answer over the remaining rows)."""
    data = nine_chunks
    node = merged_node(data)
    queries = data.queries[:20]
    gone = np.unique(data.ground_truth[:20, :3])
    node.apply(VCH, pack_delete(gone, 50))
    found = search_ids(node, queries, 50)
    assert not set(found.ravel().tolist()) & set(gone.tolist())
    alive = np.setdiff1d(np.arange(data.rows), gone)
    truth = alive[datasets.exact_neighbours(data.vectors[alive], queries, 10, "L2")]
    assert recall_at_10(found, truth) >= 0.95


def pack_delete(ids: np.ndarray, ts: int) -> MsgPack:
    from tests.unit.test_querynode import delete

    return MsgPack(ts - 1, ts, [delete(ids, ts)], {})


# -- blocks and head drops (handoff frees leading chunks) ----------------------------------

TINY = 256


def tiny_indexes(vectors: np.ndarray, chunks: int) -> ChunkIndexes:
    """``chunks`` chunks of ``TINY`` rows built, then merged (fanout 4) as far as due."""
    indexes = ChunkIndexes(chunk_spec(HNSW, InterimIndex()), TINY)
    for _ in range(chunks):
        chunk = indexes.next_chunk(len(vectors))
        indexes.install(chunk, indexes.spec.build(vectors[chunk * TINY : (chunk + 1) * TINY]))
    while (merge := indexes.next_merge()) is not None:
        assert indexes.install_merge(merge, merge.spec.build(vectors[slice(*merge.rows(TINY))]))
    return indexes


def nearest_row(indexes: ChunkIndexes, query: np.ndarray, mask: np.ndarray) -> int:
    """The best of the blocks' hits (``search`` returns each block's, unmerged)."""
    scores, rows = indexes.search(query[None, :], 1, mask, {"nprobe": 1024})
    scores = np.where(rows >= 0, scores, np.inf)
    return int(rows[0, np.argmin(scores[0])])


def test_a_head_drop_through_a_block_keeps_its_other_rows_and_never_the_freed_ones():
    vectors = np.random.default_rng(5).random((6 * TINY, DIM), np.float32)
    indexes = tiny_indexes(vectors, 6)
    assert [(b.first, b.chunks) for b in indexes.blocks()] == [(0, 4), (4, 1), (5, 1)]
    indexes.drop_head(1)  # the store freed its first chunk: rows shift down by TINY
    assert [(b.first, b.chunks) for b in indexes.blocks()] == [(-1, 4), (3, 1), (4, 1)]
    assert indexes.indexed_rows == 5 * TINY
    mask = np.ones(5 * TINY, dtype=bool)
    assert nearest_row(indexes, vectors[TINY + 7], mask) == 7  # kept: at its new offset
    assert nearest_row(indexes, vectors[5 * TINY + 3], mask) == 4 * TINY + 3
    freed = nearest_row(indexes, vectors[3], mask)  # freed: some other row answers
    assert 0 <= freed < 5 * TINY and not np.array_equal(vectors[freed + TINY], vectors[3])
    mask[7] = False  # a deleted row of the cut block stays out too
    assert nearest_row(indexes, vectors[TINY + 7], mask) != 7
    indexes.drop_head(3)  # every row of the cut block gone: so is the block
    assert [(b.first, b.chunks) for b in indexes.blocks()] == [(0, 1), (1, 1)]


def test_a_cut_block_is_never_merged_and_a_merge_across_a_drop_is_refused():
    vectors = np.random.default_rng(6).random((8 * TINY, DIM), np.float32)
    indexes = tiny_indexes(vectors, 7)
    indexes.drop_head(1)  # (-1, 4) cut; (3, 1), (4, 1), (5, 1) level 0: three, not four
    assert indexes.next_merge() is None
    chunk = indexes.next_chunk(7 * TINY)  # the eighth chunk, now chunk 6
    indexes.install(chunk, indexes.spec.build(vectors[7 * TINY : 8 * TINY]))
    merge = indexes.next_merge()
    assert merge is not None and merge.rows(TINY) == (3 * TINY, 7 * TINY)
    before = indexes.blocks()
    indexes.drop_head(1)  # while the merge was built: its rows moved
    assert not indexes.install_merge(merge, merge.spec.build(vectors[:TINY]))
    assert len(indexes.blocks()) == len(before)


def test_a_sealed_segment_stand_in_has_the_level_its_rows_fill_up_to_256_lists():
    interim = InterimIndex()
    chunk = DEFAULT_CHUNK_ROWS
    assert interim.sealed_spec(HNSW_SPEC, chunk - 1, chunk) is None  # too small: exact
    assert interim.sealed_spec(HNSW_SPEC, chunk, chunk).params["nlist"] == "128"
    assert interim.sealed_spec(HNSW_SPEC, 60_000, chunk).params["nlist"] == "256"
    assert interim.sealed_spec(HNSW_SPEC, 500_000, chunk).params["nlist"] == "256"
    assert InterimIndex("collection").sealed_spec(HNSW_SPEC, 100_000, chunk) is None


HNSW_SPEC = IndexSpec.of(HNSW)


@pytest.fixture(scope="module")
def four_chunks() -> datasets.Dataset:
    """Four full 16k chunks of the bench's clustered set: one level-1 merge."""
    return datasets.synthetic(4 * DEFAULT_CHUNK_ROWS, DIM, 100, 10)


@pytest.mark.parametrize("metric", ["L2", "COSINE"])
def test_a_merge_learns_its_lists_from_the_blocks_lists(four_chunks, one_core, metric):
    """k-means over the blocks' centroids weighted by their lists' lengths, not over rows:
    as many lists as a merge trained on rows, every row in one, and the same recall."""
    spec = chunk_spec(replace(HNSW, metric_type=metric), InterimIndex())
    rows = four_chunks.vectors
    parts = [
        spec.build(rows[i * DEFAULT_CHUNK_ROWS : (i + 1) * DEFAULT_CHUNK_ROWS]) for i in range(4)
    ]
    merged_spec = spec.merged(1)
    merged = merged_spec.merge_of(rows, parts)
    assert (merged.nlist, merged.ntotal) == (256, len(rows))
    assert merged.metric_type == parts[0].metric_type
    queries = four_chunks.queries
    if metric == "COSINE":  # searched as inner product of unit vectors
        queries = normalised(queries)
        truth = datasets.exact_neighbours(normalised(rows), queries, 10, metric)
    else:
        truth = datasets.exact_neighbours(rows, queries, 10, metric)
    params = merged_spec.search_params(None, 10, {})
    _, found = merged.search(queries, 10, params=params)
    _, by_rows = merged_spec.build(rows).search(queries, 10, params=params)
    assert recall_at_10(found, truth) >= max(0.95, recall_at_10(by_rows, truth) - 0.02)


def test_a_merge_of_blocks_with_too_few_lists_trains_on_rows(nine_chunks, one_core):
    """Blocks of 2,048 rows have 52 lists each: 4 x 52 centroids cannot make 210 lists."""
    spec = chunk_spec(HNSW, InterimIndex())
    rows = nine_chunks.vectors[: 4 * SMALL_CHUNK]
    parts = [spec.build(rows[i * SMALL_CHUNK : (i + 1) * SMALL_CHUNK]) for i in range(4)]
    merged = spec.merged(1).merge_of(rows, parts)
    assert (merged.nlist, merged.ntotal) == (210, len(rows))
