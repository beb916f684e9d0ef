"""Nullable vector fields (Milvus 2.6): a row may have no vector. pymilvus sends only the
valid rows' vectors with ``valid_data``; searches never find a null row; queries return None
for it; indexes (interim chunks, merges, sealed files) hold only the rows with a vector. On
the fault harness, through the servicer, growing rows first, then sealed ones read back from
binlogs with their index file."""

from __future__ import annotations

import numpy as np
import pytest
from pymilvus import DataType as ClientType
from pymilvus import MilvusClient
from pymilvus.client.prepare import Prepare
from pymilvus.client.search_result import SearchResult

from benchmarks.search_path import Context
from vectide.services.common import binlog
from vectide.services.common.index_spec import IndexSpec
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness, harness_config

DIM = 8
ROWS = 600


def _vector(key: int) -> list[float] | None:
    """Rows with a key divisible by 3 have no vector."""
    if key % 3 == 0:
        return None
    return np.random.default_rng(key).random(DIM).astype(np.float32).tolist()


@pytest.fixture
def served():
    config = harness_config()
    config.query.index_chunk_rows = 128  # growing rows go through interim IVF chunks
    h = Harness(config)
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("dense", ClientType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("extra", ClientType.FLOAT_VECTOR, dim=DIM, nullable=True)
    assert (
        service.CreateCollection(Prepare.create_collection_request("c", schema), Context()).code
        == 0
    )
    for field, kind in (("dense", "FLAT"), ("extra", "HNSW")):
        h.proxy.create_index("c", field, field, {"index_type": kind, "metric_type": "L2"})
    h.proxy.load_collection("c")
    h.tick()
    rows = [{"id": k, "dense": [float(k)] * DIM, "extra": _vector(k)} for k in range(ROWS)]
    reply = _insert(service, "c", schema, rows)
    assert reply.status.code == 0, reply.status
    h.tick()
    h.pump()
    while h.nodes.node(h.nodes.live_nodes()[0]).build_pending_indexes():
        pass
    return h, service


def _insert(service: MilvusService, name: str, schema, rows: list[dict]):
    """``rows`` inserted as pymilvus converts them against ``schema`` (its field infos)."""
    fields = [
        {"name": f.name, "type": f.dtype, "params": f.params, "nullable": f.nullable}
        for f in schema.fields
    ]
    return service.Insert(Prepare.row_insert_param(name, rows, "", fields), Context())


def _search(service, key: int, limit: int = 5, **kw) -> list[list[int]]:
    request = Prepare.search_requests_with_expr(
        "c",
        "extra",
        {"metric_type": "L2", "params": {"ef": 64}},
        limit,
        data=[_vector(key)],
        consistency_level="Strong",
        **kw,
    )
    reply = service.Search(request, Context())
    assert reply.status.code == 0, reply.status
    return [[hit["id"] for hit in hits] for hits in SearchResult(reply.results)]


def _outputs(service, keys: list[int]) -> dict[int, object]:
    """Each key's vector (None for a null) as the reply carries them: ``valid_data`` per row,
    vectors for the valid rows only (Milvus's sparse storage of nullable vectors)."""
    request = Prepare.query_request("c", f"id in {keys}", ["extra"], [], consistency_level="Strong")
    reply = service.Query(request, Context())
    assert reply.status.code == 0, reply.status
    ids = list(reply.fields_data[0].scalars.long_data.data)
    column = next(fd for fd in reply.fields_data if fd.field_name == "extra")
    vectors = iter(np.reshape(column.vectors.float_vector.data, (-1, DIM)).tolist())
    return {k: next(vectors) if ok else None for k, ok in zip(ids, column.valid_data, strict=True)}


def _check(service) -> None:
    hits = _search(service, 7, limit=50)[0]
    assert hits[0] == 7 and all(k % 3 for k in hits)  # null rows are never found
    exact = sorted(
        (k for k in range(ROWS) if k % 3),
        key=lambda k: float(np.sum((np.array(_vector(k)) - np.array(_vector(7))) ** 2)),
    )
    assert len(set(hits) & set(exact[:50])) >= 45
    got = _outputs(service, [3, 4])
    assert got[3] is None
    np.testing.assert_allclose(got[4], _vector(4), rtol=1e-6)


def test_growing_rows_searched_and_returned(served):
    h, service = served
    node = h.nodes.node(h.nodes.live_nodes()[0])
    shard = next(iter(node._shards.values()))
    assert shard.store.indexes["extra"].indexed_rows  # interim chunks over the valid rows
    _check(service)


def test_sealed_rows_from_binlogs_and_their_index_file(served):
    h, service = served
    h.proxy.flush(["c"])
    h.step()
    assert h.coordinators.indexes.run_once()
    h.coordinators.querycoord.handoff()
    h.pump()
    node = h.nodes.node(h.nodes.live_nodes()[0])
    sealed = [s for shard in node._shards.values() for s in shard.sealed.values()]
    assert sealed and all(s.valid("extra") is not None for s in sealed)
    _check(service)


def test_a_search_by_a_key_without_a_vector_is_refused(served):
    _, service = served
    request = Prepare.search_requests_with_expr(
        "c", "extra", {"metric_type": "L2", "params": {}}, 3, ids=[3, 4]
    )
    reply = service.Search(request, Context())
    assert reply.status.code == 1100 and "3" in reply.status.reason


def test_an_index_of_a_nullable_field_holds_only_rows_with_a_vector():
    vectors = np.random.default_rng(1).random((300, DIM)).astype(np.float32)
    held = np.flatnonzero(np.arange(300) % 3)
    for spec in (IndexSpec("HNSW", "L2", {"M": "8"}), IndexSpec("IVF_FLAT", "COSINE", {})):
        index = spec.build(vectors[held], held)  # the held rows' vectors, by their offsets
        assert index.ntotal == len(held)
        _, labels = index.search(vectors[1:2], 300)
        assert labels[0][0] == 1 and set(labels[0][labels[0] >= 0]) <= set(held.tolist())
    assert IndexSpec("HNSW", "L2", {}).build(vectors[:0], held[:0]).ntotal == 0


def test_binlogs_keep_a_vector_columns_nulls():
    vectors = np.ones((4, DIM), np.float32)
    valid = np.array([True, False, True, False])
    raw = binlog.encode_column(vectors, DataType.FLOAT_VECTOR, DIM, valid)
    rows, mask = binlog.read_column(raw, DataType.FLOAT_VECTOR, DIM)
    np.testing.assert_array_equal(mask, valid)
    assert not rows[~valid].any() and rows[valid].all()  # a null's slot reads as zeros


def test_kafka_records_and_rest_rows_may_leave_a_vector_out(served):
    """A Kafka record's null (or missing) vector and a REST row's null are nulls, as a
    pymilvus row's None; REST renders the rows back with None where there is no vector."""
    import json

    from vectide.services.ingest.batcher import columns_of
    from vectide.services.ingest.decode import RecordDecoder
    from vectide.services.proxy import convert, rest_rows

    h, _ = served
    info = h.proxy.meta.get("c")
    decoder = RecordDecoder(info.schema)
    records = [{"id": 1, "dense": [1.0] * DIM, "extra": None}, {"id": 2, "dense": [2.0] * DIM}]
    decoded = [decoder.decode(None, json.dumps(r).encode()).values for r in records]
    column = columns_of(decoder, decoded)["extra"]
    assert column.data.shape == (2, DIM) and list(column.valid) == [False, False]
    proto = convert.schema_to_proto(info.schema)
    rest = [{"id": 5, "dense": [5.0] * DIM, "extra": None}, {"id": 6, "dense": [6.0] * DIM}]
    rest[1]["extra"] = _vector(4)
    [extra] = [fd for fd in rest_rows.columns(rest, proto) if fd.field_name == "extra"]
    assert list(extra.valid_data) == [False, True] and len(extra.vectors.float_vector.data) == DIM
    back = rest_rows.rows([extra], ["extra"])
    assert back[0]["extra"] is None
    np.testing.assert_allclose(back[1]["extra"], _vector(4), rtol=1e-6)


def test_a_vector_field_added_to_a_collection_with_rows():
    """AddCollectionField of a nullable vector (how a second embedding joins a collection):
    the rows written before have no vector in it, flushed or growing; new rows may give one;
    searches of it find only those, exactly at first, then through an HNSW index file built
    over the sealed segment's rows that have one (its older part has no file of the field)."""
    from vectide.services.common.msgstream.message import FieldColumn
    from vectide.services.common.schema import FieldSchema
    from vectide.services.proxy.dql import SearchSpec

    h = Harness()
    h.create_collection("c")
    h.insert("c", range(0, 50))
    h.proxy.flush(["c"])
    h.step()
    h.insert("c", range(50, 60))  # growing when the field comes
    h.proxy.add_collection_field(
        "c", FieldSchema(0, "extra", DataType.FLOAT_VECTOR, dim=DIM, nullable=True)
    )
    info = h.proxy.meta.get("c")
    keys = np.arange(100, 140)
    new = np.random.default_rng(5).random((len(keys), DIM)).astype(np.float32)
    columns = {
        "id": FieldColumn(100, "id", DataType.INT64, keys),
        "vec": FieldColumn(
            101, "vec", DataType.FLOAT_VECTOR, np.ones((len(keys), 4), np.float32), 4
        ),
        "extra": FieldColumn(
            info.schema.field("extra").field_id, "extra", DataType.FLOAT_VECTOR, new, DIM
        ),
    }
    h.proxy.insert("c", "", columns, len(keys))
    h.tick()
    h.pump()

    def nearest(stage: str) -> list[int]:
        spec = SearchSpec(
            collection_name="c",
            vectors=new[3:4],
            anns_field="extra",
            limit=60,
            use_default_consistency=False,
            consistency_level=ConsistencyLevel.STRONG,
        )
        hits = h.proxy.search(spec)[1]
        found = [int(k) for k in hits.pks]
        assert found[0] == 103 and set(found) == set(keys.tolist()), stage  # only the new rows
        return found

    nearest("growing and sealed, exact")
    h.proxy.release_collection("c")
    h.proxy.create_index("c", "extra", "extra", {"index_type": "HNSW", "metric_type": "L2"})
    h.proxy.flush(["c"])
    h.step()
    assert h.coordinators.indexes.run_once()
    h.proxy.load_collection("c")
    h.tick()
    h.pump()
    nearest("sealed, through the index file")


@pytest.mark.parametrize(
    ("kind", "metric", "value"),
    [
        (ClientType.FLOAT16_VECTOR, "L2", lambda k: np.full(DIM, k / 10, np.float16)),
        (ClientType.BINARY_VECTOR, "HAMMING", lambda k: np.array([k % 256], np.uint8).tobytes()),
        (ClientType.INT8_VECTOR, "L2", lambda k: np.full(DIM, k % 100, np.int8)),
    ],
)
def test_other_dense_types_may_be_null(kind, metric, value):
    h = Harness()
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("v", kind, dim=DIM, nullable=True)
    create = Prepare.create_collection_request("t", schema)
    assert service.CreateCollection(create, Context()).code == 0
    index = "BIN_FLAT" if kind == ClientType.BINARY_VECTOR else "FLAT"
    h.proxy.create_index("t", "v", "v", {"index_type": index, "metric_type": metric})
    h.proxy.load_collection("t")
    h.tick()
    rows = [{"id": k, "v": None if k % 2 else value(k)} for k in range(20)]
    assert _insert(service, "t", schema, rows).status.code == 0
    h.tick()
    h.pump()
    request = Prepare.search_requests_with_expr(
        "t",
        "v",
        {"metric_type": metric, "params": {}},
        20,
        data=[value(4)],
        consistency_level="Strong",
    )
    reply = service.Search(request, Context())
    assert reply.status.code == 0, reply.status
    found = list(reply.results.ids.int_id.data)
    assert found[0] == 4 and sorted(found) == list(range(0, 20, 2))  # the rows with a vector
    query = Prepare.query_request("t", "id in [2, 3]", ["v"], [], consistency_level="Strong")
    column = next(fd for fd in service.Query(query, Context()).fields_data if fd.field_name == "v")
    assert list(column.valid_data) == [True, False]


def test_rows_without_a_vector_keep_none_in_the_query_node():
    """A vector field added to a collection with rows costs each old row an 8-byte slot,
    not its width (Milvus stores only the valid rows' vectors); rows keep their vectors,
    searches and outputs read them by row, and dropping rows (handoff) drops theirs."""
    from tests.unit.test_add_field import base_schema, vectors
    from tests.unit.test_nullable import insert_msg
    from vectide.services.common.msgstream.message import FieldColumn
    from vectide.services.common.schema import FieldSchema
    from vectide.services.querynode.segment import ShardStore

    store = ShardStore(base_schema(), chunk_rows=1000)
    store.insert(insert_msg([vectors(10_000)], 10_000))
    before = store.held_bytes()["vectors"]
    store.add_field(FieldSchema(102, "e", DataType.FLOAT_VECTOR, dim=128, nullable=True))
    added = store.held_bytes()["vectors"] - before
    assert added <= 16_384 * 8 + 16 * 128 * 4  # the slots, and room for a few vectors
    assert added < 10_000 * 128 * 4 / 30  # a dense column held 5.1 MB
    extra = np.random.default_rng(2).random((4, 128)).astype(np.float32)
    given = FieldColumn(102, "e", DataType.FLOAT_VECTOR, extra, 128, np.array([1, 0, 1, 1], bool))
    store.insert(insert_msg([vectors(4), given], 4))
    new = np.arange(10_000, 10_004)
    out = store.output("e", new)
    assert out[1] is None and np.allclose(out[0], extra[0]) and np.allclose(out[3], extra[3])
    found, held = store.index_input("e", 9_998, 10_004)
    assert held.tolist() == [2, 4, 5] and np.allclose(found, extra[[0, 2, 3]])
    scores, rows = store.search("e", extra[2:3], "L2", 2, np.ones(store.num_rows, bool))
    assert rows[0].tolist()[0] == 10_002 and scores[0][0] == pytest.approx(0, abs=1e-4)
    store.hide(np.arange(10_000))  # handed off: the old rows go, the new keep their vectors
    assert store.free_hidden_head() == 10_000
    out = store.output("e", np.arange(4))
    assert out[1] is None and np.allclose(out[0], extra[0]) and np.allclose(out[3], extra[3])
