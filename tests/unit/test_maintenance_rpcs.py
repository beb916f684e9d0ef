"""FlushAll / GetFlushAllState (pymilvus ``flush_all``), GetPartitionStatistics
(``get_partition_stats``) and AlterIndex (``alter_index_properties``,
``drop_index_properties``) on the fault harness."""

from __future__ import annotations

from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import milvus_pb2

from benchmarks.search_path import Context
from vectide.services.common import collection_properties, timestamp
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness


def test_flush_all_seals_every_collection_and_reports_when_the_data_node_persisted_them():
    h = Harness()
    service = MilvusService(h.proxy)
    h.create_collection("a")
    h.create_collection("b")
    h.proxy.create_database("other", {})
    h.insert("a", range(5))
    h.insert("b", range(3))
    reply = service.FlushAll(Prepare.flush_all_request(""), Context())
    assert reply.status.code == 0, reply.status
    segments = h.datacoord.segment_rows(h.proxy.meta.get("a").collection_id)
    assert {row[3] for row in segments} == {"Sealed"}

    def state() -> bool:
        request = Prepare.get_flush_all_state_request(reply.flush_all_ts, "")
        answer = service.GetFlushAllState(request, Context())
        assert answer.status.code == 0, answer.status
        return answer.flushed

    assert not state()
    h.tick()
    h.datanode.flush_once()
    assert state()
    refused = service.FlushAll(
        milvus_pb2.FlushAllRequest(flush_targets=[milvus_pb2.FlushAllTarget(db_name="x")]),
        Context(),
    )
    assert refused.status.code == 1100


def test_partition_statistics_count_the_rows_of_a_loaded_partition():
    h = Harness()
    service = MilvusService(h.proxy)
    h.create_collection("c")
    h.proxy.release_collection("c")
    h.proxy.create_partition("c", "p")
    h.proxy.load_collection("c")
    h.tick()
    h.insert("c", range(4))

    def stats(partition: str) -> milvus_pb2.GetPartitionStatisticsResponse:
        request = milvus_pb2.GetPartitionStatisticsRequest(
            collection_name="c", partition_name=partition
        )
        return service.GetPartitionStatistics(request, Context())

    h.tick()
    h.pump()
    assert {kv.key: kv.value for kv in stats("_default").stats} == {"row_count": "4"}
    assert stats("p").stats[0].value == "0"
    missing = stats("nope")
    assert missing.status.code == 200 and "nope" in missing.status.reason


def test_alter_index_sets_and_drops_mmap_and_refuses_anything_else():
    h = Harness()
    service = MilvusService(h.proxy)
    h.create_collection("c")

    def described() -> dict[str, str]:
        reply = service.DescribeIndex(Prepare.describe_index_request("c", "idx"), Context())
        return {kv.key: kv.value for kv in reply.index_descriptions[0].params}

    def alter(request) -> object:
        return service.AlterIndex(request, Context())

    assert (
        alter(Prepare.alter_index_properties_request("c", "idx", {"mmap.enabled": True})).code == 0
    )
    assert described()["mmap.enabled"] == "true"
    h.crash_coordinators()  # kept in the catalog
    assert described()["mmap.enabled"] == "true"
    assert alter(Prepare.drop_index_properties_request("c", "idx", ["mmap.enabled"])).code == 0
    assert "mmap.enabled" not in described()
    refused = alter(Prepare.alter_index_properties_request("c", "idx", {"nlist": 8}))
    assert refused.code == 1100 and "only mmap.enabled" in refused.reason
    missing = alter(Prepare.alter_index_properties_request("c", "nope", {"mmap.enabled": 1}))
    assert missing.code != 0 and "index not found" in missing.reason


def test_truncate_removes_every_row_and_keeps_the_collection():
    h = Harness()
    service = MilvusService(h.proxy)
    h.create_collection("c")
    h.insert("c", range(5))
    h.tick()
    h.datanode.flush_once()  # some rows persisted, the rest growing
    h.insert("c", range(5, 8))
    h.tick()
    h.pump()
    assert h.query_ids("c") == list(range(8))
    reply = service.TruncateCollection(
        milvus_pb2.TruncateCollectionRequest(collection_name="c"), Context()
    )
    assert reply.status.code == 0, reply.status
    assert h.query_ids("c") == []
    assert h.search_ids("c", 3) == []
    h.insert("c", [3, 20])  # the collection, its index and load state stay
    h.tick()
    h.pump()
    assert h.query_ids("c") == [3, 20]
    h.crash_coordinators()  # the truncation is in the catalog
    assert h.query_ids("c") == [3, 20]
    info = h.proxy.meta.get("c")
    assert info.truncated_ts and info.indexes
    # a time-travel read to a snapshot before the truncation is not bounded by it
    now = timestamp.now_ms()
    assert collection_properties.oldest_visible(info, now) == info.truncated_ts
    assert collection_properties.oldest_visible(info, now, info.truncated_ts - 1) == 0
    # once the stamp is behind every read, compaction and GC may remove the rows
    late = timestamp.physical_ms(info.truncated_ts) + 1
    assert collection_properties.expiries([info], late) == {info.collection_id: info.truncated_ts}
    assert collection_properties.expiries([info], late - 2) == {}


def test_batch_describe_collection_answers_each_name_in_order_and_fails_only_the_missing():
    h = Harness()
    service = MilvusService(h.proxy)
    h.create_collection("a")
    h.create_collection("b")
    request = milvus_pb2.BatchDescribeCollectionRequest(collection_name=["b", "nope", "a"])
    reply = service.BatchDescribeCollection(request, Context())
    assert reply.status.code == 0, reply.status
    assert [r.collection_name for r in reply.responses] == ["b", "nope", "a"]
    b, missing, a = reply.responses
    assert b.status.code == 0 and b.schema.name == "b" and b.collectionID
    assert a.collectionID == h.proxy.meta.get("a").collection_id
    assert missing.status.code == 100 and "nope" in missing.status.reason
    assert missing.HasField("schema") and not missing.schema.fields  # what the Node SDK needs
    empty = service.BatchDescribeCollection(milvus_pb2.BatchDescribeCollectionRequest(), Context())
    assert empty.status.code == 1101 and "cannot be empty" in empty.status.reason


def test_index_statistics_are_describe_index_answers():
    h = Harness()
    service = MilvusService(h.proxy)
    h.create_collection("c")
    h.insert("c", range(6))
    h.tick()
    h.datanode.flush_once()

    def statistics(index_name: str) -> milvus_pb2.GetIndexStatisticsResponse:
        request = milvus_pb2.GetIndexStatisticsRequest(collection_name="c", index_name=index_name)
        return service.GetIndexStatistics(request, Context())

    described = service.DescribeIndex(Prepare.describe_index_request("c", ""), Context())
    for name in ("", "idx"):
        reply = statistics(name)
        assert reply.status.code == 0, reply.status
        assert list(reply.index_descriptions) == list(described.index_descriptions)
    (index,) = statistics("idx").index_descriptions
    assert (index.index_name, index.field_name, index.total_rows) == ("idx", "vec", 6)
    missing = statistics("nope")
    assert missing.status.code == 700 and "index not found" in missing.status.reason
