"""Loading and releasing partitions in the querycoord core: which partitions reads may see,
the load state per partition, and the collection released with its last partition."""

import pytest

from tests.unit.test_rootcoord import Nodes, Recorder, schema
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.load_state import LOAD_STATE_LOADED, LOAD_STATE_NOT_LOAD
from vectide.services.common.schema import ConsistencyLevel, IndexInfo
from vectide.services.querycoord.core import QueryCoord
from vectide.services.rootcoord.core import RootCoord


@pytest.fixture
def setup():
    root = RootCoord(MemoryKV(), Recorder(), "t", 2)
    root.start()
    info = root.create_collection(root.alloc_timestamp(), schema(), 2, ConsistencyLevel.STRONG)
    root.create_index(root.alloc_timestamp(), "c", IndexInfo(0, "", "v", "FLAT", "L2"))
    for name in ("p1", "p2"):
        root.create_partition(root.alloc_timestamp(), "c", name)
    ids = {p.name: p.partition_id for p in root.describe_collection("c").partitions}
    kv = MemoryKV()
    return QueryCoord(kv, root, Nodes([1])), info.collection_id, ids, kv, root


def state(qc, cid, *parts):
    return qc.load_state(cid, list(parts))[0]


def test_partitions_load_one_by_one_and_reads_see_only_them(setup):
    qc, cid, ids, _, _ = setup
    with pytest.raises(MilvusError) as err:
        qc.loaded_partitions(cid)
    assert err.value.code == Code.COLLECTION_NOT_LOADED
    qc.load_partitions(cid, [ids["p1"]])
    assert qc.loaded_partitions(cid) == [ids["p1"]]
    assert state(qc, cid) == LOAD_STATE_LOADED  # the collection is loaded in part
    assert state(qc, cid, ids["p1"]) == LOAD_STATE_LOADED
    assert state(qc, cid, ids["p1"], ids["p2"]) == LOAD_STATE_NOT_LOAD
    qc.load_partitions(cid, [ids["p2"]])
    assert qc.loaded_partitions(cid) == sorted([ids["p1"], ids["p2"]])
    qc.release_partitions(cid, [ids["p1"], ids["p2"]])  # the last ones: the collection goes
    assert state(qc, cid) == LOAD_STATE_NOT_LOAD


def test_a_whole_collection_stays_whole_until_a_partition_is_released(setup):
    qc, cid, ids, _, _ = setup
    qc.load_collection(cid)
    assert qc.loaded_partitions(cid) is None  # every partition, later ones too
    qc.load_partitions(cid, [ids["p1"]])
    assert qc.loaded_partitions(cid) is None
    qc.release_partitions(cid, [ids["p1"]])
    assert qc.loaded_partitions(cid) == sorted([ids["_default"], ids["p2"]])
    assert state(qc, cid, ids["p1"]) == LOAD_STATE_NOT_LOAD
    qc.load_collection(cid)
    assert qc.loaded_partitions(cid) is None


def test_partition_loads_survive_a_coordinator_restart(setup):
    qc, cid, ids, kv, root = setup
    qc.load_partitions(cid, [ids["p2"]])
    again = QueryCoord(kv, root, Nodes([1]))
    again.start()
    assert again.loaded_partitions(cid) == [ids["p2"]]
    again.release_collection(cid)
    third = QueryCoord(kv, root, Nodes([1]))
    third.start()
    assert third.load_state(cid)[0] == LOAD_STATE_NOT_LOAD
