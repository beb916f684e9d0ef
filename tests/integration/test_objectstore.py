"""The S3 client against the real SeaweedFS."""

import pytest

from vectide.services.common.objectstore import ObjectStore


@pytest.fixture
def store(infra):
    s = ObjectStore(infra.s3)
    s.ensure_bucket()
    s.ensure_bucket()  # idempotent
    yield s
    s.delete_prefix("")


def test_put_get_list_delete(store):
    payload = bytes(range(256)) * 4096  # 1 MiB, binary-safe
    store.put("insert_log/1/2/3/100/1", payload)
    store.put("insert_log/1/2/3/101/1", b"x")
    store.put("delta_log/1/2/3/1", b"d")
    assert store.get("insert_log/1/2/3/100/1") == payload
    assert list(store.list("insert_log/")) == ["insert_log/1/2/3/100/1", "insert_log/1/2/3/101/1"]
    assert store.exists("delta_log/1/2/3/1")
    assert store.delete_prefix("insert_log/") == 2
    assert list(store.list("insert_log/")) == []
    store.delete("delta_log/1/2/3/1")
    assert not store.exists("delta_log/1/2/3/1")


def test_overwrite_is_idempotent_and_missing_key_is_keyerror(store):
    store.put("stats_log/a", b"1")
    store.put("stats_log/a", b"2")
    assert store.get("stats_log/a") == b"2"
    with pytest.raises(KeyError):
        store.get("stats_log/missing")


def test_keys_live_under_the_root_path(infra, store):
    store.put("k", b"v")
    raw = ObjectStore(type(infra.s3)(**{**vars(infra.s3), "root_path": ""}))
    assert f"{infra.s3.root_path}/k" in set(raw.list(infra.s3.root_path))
