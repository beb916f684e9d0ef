"""The search path's per-request shortcuts keep its answers: names resolved once per
collection meta, requests not copied for a node leading every shard, faiss parameters shared,
replies filled in place."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
from pymilvus.client.search_result import SearchResult

from vectide.services.common.errors import MilvusError
from vectide.services.common.index_spec import IndexSpec
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.results import SearchHits
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
    IndexInfo,
)
from vectide.services.proxy import convert
from vectide.services.proxy.dql import Outputs, _for_shards, _resolved_names


def info(metric: str, pk_type: DataType = DataType.INT64) -> CollectionInfo:
    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", pk_type, is_primary=True, max_length=16),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=2),
            FieldSchema(102, "n", DataType.INT32),
        ],
    )
    indexes = [
        IndexInfo(1, "vec", "vec", "HNSW", metric),
        IndexInfo(2, "n", "n", "STL_SORT", ""),
    ]
    return CollectionInfo(
        1, "c", schema, 2, ["v0", "v1"], ["p0", "p1"], ConsistencyLevel.BOUNDED, 1, indexes=indexes
    )


def test_a_search_sees_the_metric_of_the_collection_meta_it_reads():
    before = info("L2")
    names = _resolved_names(before, "", "", ["n"])
    assert (names.field.name, names.metric) == ("vec", "L2")
    assert names.outputs.fetch == ["n"] and names.scalar_indexes == {"n": "STL_SORT"}
    # a DDL replaces the cached meta: the next search resolves against the new one
    after = info("IP")
    assert _resolved_names(after, "", "", ["n"]).metric == "IP"
    assert _resolved_names(before, "vec", "", ["n"]).metric == "L2"


def test_a_wrong_name_is_refused_every_time_never_remembered():
    meta = info("L2")
    for _ in range(2):
        with pytest.raises(MilvusError, match="metric type not match"):
            _resolved_names(meta, "", "IP", [])
        with pytest.raises(MilvusError, match="not a vector field"):
            _resolved_names(meta, "n", "", [])
        with pytest.raises(MilvusError, match="field nope not exist"):
            _resolved_names(meta, "", "", ["nope"])


def test_a_node_leading_every_shard_gets_the_request_itself_others_their_shards():
    request = ShardSearchRequest(
        1, ["v0", "v1"], "vec", np.zeros((1, 2), np.float32), "L2", 10, 5, 1.0
    )
    assert _for_shards(request, ["v0", "v1"]) is request
    part = _for_shards(request, ["v1"])
    assert part.vchannels == ["v1"] and request.vchannels == ["v0", "v1"]
    assert part.vectors is request.vectors and part.topk == 10


def test_search_parameters_without_a_selector_are_shared_and_keep_their_values():
    hnsw = IndexSpec("HNSW", "L2", {})
    shared = hnsw.search_params(None, 10, {"ef": 32})
    assert shared is hnsw.search_params(None, 10, {"ef": 32})
    assert shared.efSearch == 32
    assert hnsw.search_params(None, 50, {"ef": 32}).efSearch == 50  # ef never below k
    selected = hnsw.search_params(faiss.IDSelectorAll(), 10, {"ef": 32})
    assert selected is not shared and selected.sel is not None and shared.sel is None
    ivf = IndexSpec("IVF_FLAT", "L2", {}, min_nprobe=16)
    assert ivf.search_params(None, 10, {"nprobe": 4}).nprobe == 16
    assert ivf.search_params(None, 10, {"nprobe": 32}).nprobe == 32


@pytest.mark.parametrize(
    ("pk_type", "pks", "kind"),
    [
        (DataType.INT64, np.array([7, 8, 9]), "int_id"),
        (DataType.VARCHAR, ["k7", "k8", "k9"], "str_id"),
    ],
)
def test_search_reply_carries_hits_scores_and_counts(pk_type, pks, kind):
    hits = SearchHits("L2", [2, 1], pks, np.array([0.5, 1.5, 0.25], np.float32))
    reply = convert.search_results(info("L2", pk_type), hits, Outputs([], ["id"], pk=True), 2)
    assert reply.HasField("status") and reply.status.code == 0 and reply.collection_name == "c"
    data = reply.results
    assert data.ids.WhichOneof("id_field") == kind
    assert (data.num_queries, data.top_k, list(data.topks)) == (2, 2, [2, 1])
    result = SearchResult(data)
    assert [[h["id"] for h in q] for q in result] == [list(pks[:2]), list(pks[2:])]
    assert [h["distance"] for q in result for h in q] == [0.5, 1.5, 0.25]


@pytest.mark.parametrize(
    ("pk_type", "pks", "kind"),
    [(DataType.INT64, np.empty(0, np.int64), "int_id"), (DataType.VARCHAR, [], "str_id")],
)
def test_a_reply_without_hits_still_names_its_key_kind(pk_type, pks, kind):
    hits = SearchHits("L2", [0], pks, np.empty(0, np.float32))
    reply = convert.search_results(info("L2", pk_type), hits, Outputs([], [], pk=False), 10)
    assert reply.results.ids.WhichOneof("id_field") == kind
    assert list(reply.results.topks) == [0] and not reply.results.scores
