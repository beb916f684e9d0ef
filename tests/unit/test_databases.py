"""Databases in the rootcoord core and the catalog (memory metastore): names, scoping, the
rules Milvus applies to create and drop, and a catalog that survives a reload."""

import pytest

from tests.unit.test_rootcoord import Recorder, schema
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.names import DEFAULT_DB, describe, qualified, split, validate_db_name
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.rootcoord.core import RootCoord


@pytest.fixture
def root():
    rc = RootCoord(MemoryKV(), Recorder(), "t", 2)
    rc.start()
    return rc


def create(root, name, db=DEFAULT_DB):
    ts = root.alloc_timestamp()
    return root.create_collection(ts, schema(name), 1, ConsistencyLevel.BOUNDED, db_name=db)


def test_references_qualify_names_outside_the_default_database():
    assert qualified(DEFAULT_DB, "docs") == qualified("", "docs") == "docs"
    assert qualified("d1", "docs") == "d1.docs"
    assert split("d1.docs") == ("d1", "docs")
    assert split("docs") == (DEFAULT_DB, "docs")
    assert describe("d1.docs") == "[database=d1][collection=docs]"
    assert describe("docs") == "[collection=docs]"


@pytest.mark.parametrize("bad", ["", "1db", "a-b", "a.b", "x" * 65, "é"])
def test_invalid_database_names_are_rejected_with_milvus_code(bad):
    with pytest.raises(MilvusError) as err:
        validate_db_name(bad)
    assert err.value.code == Code.DATABASE_INVALID_NAME


def test_default_always_exists_and_created_ones_are_listed(root):
    assert [d.name for d in root.list_databases()] == [DEFAULT_DB]
    db = root.create_database(root.alloc_timestamp(), "d1", {"k": "v"})
    assert [d.name for d in root.list_databases()] == [DEFAULT_DB, "d1"]
    assert root.describe_database("d1") == db and db.properties == {"k": "v"}
    with pytest.raises(MilvusError, match="database already exist: d1"):
        root.create_database(root.alloc_timestamp(), "d1")
    with pytest.raises(MilvusError) as missing:
        root.describe_database("nope")
    assert missing.value.code == Code.DATABASE_NOT_FOUND


def test_collections_are_scoped_by_database(root):
    root.create_database(root.alloc_timestamp(), "d1")
    a = create(root, "docs")
    b = create(root, "docs", "d1")  # the same name in another database
    assert a.collection_id != b.collection_id and b.db_name == "d1"
    assert root.describe_collection("d1.docs").collection_id == b.collection_id
    assert root.describe_collection("docs").collection_id == a.collection_id
    assert [c.name for c in root.show_collections("d1")] == ["docs"]
    assert len(root.show_collections()) == 2  # the coordinators see every database
    with pytest.raises(MilvusError, match=r"\[database=d1\]\[collection=other\]") as err:
        root.describe_collection("d1.other")
    assert err.value.code == Code.COLLECTION_NOT_FOUND


def test_a_missing_database_is_named_in_errors(root):
    for call in (
        lambda: create(root, "docs", "nope"),
        lambda: root.describe_collection("nope.docs"),
        lambda: root.show_collections("nope"),
    ):
        with pytest.raises(MilvusError) as err:
            call()
        assert err.value.code == Code.DATABASE_NOT_FOUND


def test_drop_rules_follow_milvus(root):
    with pytest.raises(MilvusError, match="can not drop default database"):
        root.drop_database(root.alloc_timestamp(), DEFAULT_DB)
    root.create_database(root.alloc_timestamp(), "d1")
    create(root, "docs", "d1")
    with pytest.raises(MilvusError, match="not empty, must drop all collections") as err:
        root.drop_database(root.alloc_timestamp(), "d1")
    assert err.value.code == Code.UNEXPECTED
    root.drop_collection(root.alloc_timestamp(), "d1.docs")
    root.drop_database(root.alloc_timestamp(), "d1")
    root.drop_database(root.alloc_timestamp(), "d1")  # dropping a missing one succeeds
    assert [d.name for d in root.list_databases()] == [DEFAULT_DB]


def test_collection_names_follow_milvus_rules(root):
    with pytest.raises(MilvusError) as err:
        create(root, "a.b")
    assert err.value.code == Code.PARAMETER_INVALID


def test_databases_and_scoped_collections_survive_a_reload():
    kv = MemoryKV()
    first = RootCoord(kv, Recorder(), "t", 2)
    first.start()
    first.create_database(first.alloc_timestamp(), "d1")
    create(first, "docs", "d1")
    second = RootCoord(kv, Recorder(), "t", 2)
    second.start()
    assert [d.name for d in second.list_databases()] == [DEFAULT_DB, "d1"]
    assert second.describe_collection("d1.docs").db_name == "d1"


def test_alter_database_sets_or_deletes_properties(root):
    root.create_database(root.alloc_timestamp(), "d1", {"a": "1"})
    root.alter_database(root.alloc_timestamp(), "d1", {"b": "2"})
    root.alter_database(root.alloc_timestamp(), "d1", {}, ["a"])
    assert root.describe_database("d1").properties == {"b": "2"}
    root.alter_database(root.alloc_timestamp(), DEFAULT_DB, {"c": "3"})
    assert root.describe_database(DEFAULT_DB).properties == {"c": "3"}
    with pytest.raises(MilvusError, match="at the same time"):
        root.alter_database(root.alloc_timestamp(), "d1", {"x": "1"}, ["b"])
    with pytest.raises(MilvusError) as err:
        root.alter_database(root.alloc_timestamp(), "nope", {"x": "1"})
    assert err.value.code == Code.DATABASE_NOT_FOUND


def test_a_databases_time_zone_is_inherited_by_its_new_collections(root):
    """Milvus's database-level default zone: a collection created without its own
    ``timezone`` takes the database's; one of its own keeps it; zones are IANA names."""
    root.create_database(root.alloc_timestamp(), "tokyo", {"timezone": "Asia/Tokyo"})
    inherited = create(root, "events", "tokyo")
    assert inherited.properties == {"timezone": "Asia/Tokyo"}
    own = root.create_collection(
        root.alloc_timestamp(),
        schema("local"),
        1,
        ConsistencyLevel.BOUNDED,
        {"timezone": "UTC"},
        db_name="tokyo",
    )
    assert own.properties == {"timezone": "UTC"}
    assert create(root, "plain").properties == {}  # the default database has no zone
    for bad in (
        lambda: root.create_database(root.alloc_timestamp(), "mars", {"timezone": "Mars/Base"}),
        lambda: root.alter_database(root.alloc_timestamp(), "tokyo", {"timezone": "Nowhere"}),
        lambda: root.alter_collection(root.alloc_timestamp(), "plain", {"timezone": "X/Y"}, []),
    ):
        with pytest.raises(MilvusError, match="unknown or invalid IANA Time Zone ID"):
            bad()
    assert root.describe_database("tokyo").properties == {"timezone": "Asia/Tokyo"}
