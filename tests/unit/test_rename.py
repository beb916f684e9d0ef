"""rename_collection in the rootcoord core: Milvus's checks, the same id and channels under
the new name, across databases, and proxies told under every old name."""

import pytest

from tests.unit.test_aliases import ts, watched_root
from tests.unit.test_databases import create
from tests.unit.test_rootcoord import Recorder
from vectide.services.common.errors import MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.rootcoord.core import RootCoord


@pytest.fixture
def root():
    return watched_root()


def test_a_renamed_collection_keeps_its_id_channels_and_aliases(root):
    a = create(root, "a")
    root.create_alias(ts(root), "a", "live")
    root._invalidator.names.clear()
    root.rename_collection(ts(root), "a", "default", "b")
    b = root.describe_collection("b")
    assert (b.collection_id, b.vchannels) == (a.collection_id, a.vchannels)
    assert root.describe_collection("live").name == "b"
    assert root._invalidator.names == ["a", "live"]
    with pytest.raises(MilvusError, match="can't find collection"):
        root.describe_collection("a")


def test_rename_into_another_database(root):
    root.create_database(ts(root), "d1")
    a = create(root, "a")
    root.rename_collection(ts(root), "a", "d1", "a")
    moved = root.describe_collection("d1.a")
    assert moved.collection_id == a.collection_id and moved.db_name == "d1"
    assert root.show_collections("default") == []


@pytest.mark.parametrize(
    ("old", "db", "new", "message"),
    [
        ("live", "default", "x", "unsupported use an alias to rename collection"),
        ("a", "default", "live", "cannot rename collection to an existing alias"),
        ("a", "default", "b", "duplicated new collection name default:b"),
        ("a", "nope", "x", "target database:nope not found"),
        ("a", "d1", "x", "must drop all aliases of this collection"),
        ("missing", "default", "x", "can't find collection"),
        ("a", "default", "bad-name", "Invalid collection name"),
    ],
)
def test_rename_errors_follow_milvus(root, old, db, new, message):
    root.create_database(ts(root), "d1")
    create(root, "a")
    create(root, "b")
    root.create_alias(ts(root), "a", "live")
    with pytest.raises(MilvusError, match=message):
        root.rename_collection(ts(root), old, db, new)


def test_a_rename_survives_a_reload():
    kv = MemoryKV()
    first = RootCoord(kv, Recorder(), "t", 2)
    first.start()
    a = create(first, "a")
    first.rename_collection(first.alloc_timestamp(), "a", "default", "b")
    second = RootCoord(kv, Recorder(), "t", 2)
    second.start()
    assert second.describe_collection("b").collection_id == a.collection_id
    assert second.meta.get("a") is None
