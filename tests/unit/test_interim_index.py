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
)
from vectide.services.common.msgstream.message import DataType, FieldColumn, MsgPack
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.schema import CollectionInfo, CollectionSchema, FieldSchema, IndexInfo
from vectide.services.querynode.chunk_index import DEFAULT_CHUNK_ROWS
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
