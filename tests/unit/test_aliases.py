"""Aliases in the rootcoord core (memory metastore): Milvus's rules and errors, resolution
wherever a collection name is taken, cache invalidation under every name, and a reload."""

import pytest

from tests.unit.test_databases import create
from tests.unit.test_rootcoord import Recorder
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.rootcoord.core import RootCoord


class Invalidations:
    def __init__(self):
        self.names = []

    def invalidate(self, name):
        self.names.append(name)

    def wake_timeticks(self, proxy_ids):
        pass


def watched_root() -> RootCoord:
    """A started rootcoord whose cache invalidations are recorded."""
    rc = RootCoord(MemoryKV(), Recorder(), "t", 2, invalidator=Invalidations())
    rc.start()
    return rc


@pytest.fixture
def root():
    return watched_root()


def ts(root):
    return root.alloc_timestamp()


def code_of(call):
    with pytest.raises(MilvusError) as err:
        call()
    return err.value.code


def test_an_alias_resolves_wherever_a_collection_name_is_taken(root):
    a = create(root, "a")
    root.create_alias(ts(root), "a", "live")
    assert root.describe_collection("live").collection_id == a.collection_id
    root.create_partition(ts(root), "live", "p1")  # DDL through the alias
    assert root.describe_collection("a").partition("p1") is not None
    assert root.describe_alias("live") == "a"
    assert root.list_aliases("default") == ["live"]
    assert root.list_aliases("default", "a") == ["live"]
    root.create_alias(ts(root), "a", "live")  # the same alias again: no error, as Milvus


def test_alter_moves_an_alias_and_invalidates_it(root):
    create(root, "a")
    b = create(root, "b")
    root.create_alias(ts(root), "a", "live")
    root._invalidator.names.clear()
    root.alter_alias(ts(root), "b", "live")
    assert root.describe_collection("live").collection_id == b.collection_id
    assert root._invalidator.names == ["live"]
    root._invalidator.names.clear()
    root.create_partition(ts(root), "b", "p1")
    assert root._invalidator.names == ["b", "live"]  # the collection under every name


def test_errors_follow_milvus(root):
    create(root, "a")
    create(root, "b")
    root.create_alias(ts(root), "a", "live")
    assert code_of(lambda: root.create_alias(ts(root), "nope", "x")) == Code.COLLECTION_NOT_FOUND
    assert code_of(lambda: root.create_alias(ts(root), "live", "x")) == Code.COLLECTION_NOT_FOUND
    assert code_of(lambda: root.create_alias(ts(root), "b", "live")) == Code.ALIAS_ALREADY_EXIST
    conflict = Code.ALIAS_COLLECTION_NAME_CONFLICT
    assert code_of(lambda: root.create_alias(ts(root), "a", "b")) == conflict
    assert code_of(lambda: create(root, "live")) == conflict
    assert code_of(lambda: root.alter_alias(ts(root), "b", "other")) == Code.ALIAS_NOT_FOUND
    assert code_of(lambda: root.describe_alias("other")) == Code.ALIAS_NOT_FOUND
    assert code_of(lambda: root.create_alias(ts(root), "a", "bad-name")) == Code.PARAMETER_INVALID
    with pytest.raises(MilvusError, match="because it has associated aliases"):
        root.drop_collection(ts(root), "a")
    with pytest.raises(MilvusError, match="cannot drop the collection via alias"):
        root.drop_collection(ts(root), "live")
    root.drop_alias(ts(root), "live")
    root.drop_alias(ts(root), "live")  # dropping a missing alias succeeds
    root.drop_collection(ts(root), "a")


def test_aliases_are_scoped_by_database_and_survive_a_reload():
    kv = MemoryKV()
    first = RootCoord(kv, Recorder(), "t", 2)
    first.start()
    first.create_database(first.alloc_timestamp(), "d1")
    b = create(first, "b", "d1")
    first.create_alias(first.alloc_timestamp(), "d1.b", "d1.live")
    with pytest.raises(MilvusError):
        first.describe_collection("live")  # not in the default database
    second = RootCoord(kv, Recorder(), "t", 2)
    second.start()
    assert second.describe_collection("d1.live").collection_id == b.collection_id
    assert second.list_aliases("d1") == ["live"] and second.list_aliases("default") == []
