"""Behaviour every MetaKV must have; subclassed per implementation with a ``kv`` fixture."""

import pytest

from vectide.services.common.kv import KVError, Txn


class KVContract:
    def test_get_missing_is_none(self, kv):
        assert kv.get("a/missing") is None

    def test_put_get_overwrite(self, kv):
        kv.put("a/b", b"1")
        kv.put("a/b", b"2")
        assert kv.get("a/b") == b"2"

    def test_delete_is_recursive_and_idempotent(self, kv):
        kv.put("d/x", b"1")
        kv.put("d/x/y", b"2")
        kv.delete("d/x")
        kv.delete("d/x")
        assert kv.get("d/x") is None
        assert kv.get("d/x/y") is None

    def test_compare_and_set(self, kv):
        assert kv.compare_and_set("c/k", None, b"1")
        assert not kv.compare_and_set("c/k", None, b"2")
        assert not kv.compare_and_set("c/k", b"0", b"2")
        assert kv.compare_and_set("c/k", b"1", b"2")
        assert kv.get("c/k") == b"2"

    def test_txn_applies_all_or_nothing(self, kv):
        kv.put("t/guard", b"v1")
        kv.put("t/old", b"x")
        failed = Txn(checks={"t/guard": b"v0"}, puts={"t/new": b"n"}, deletes=["t/old"])
        assert not kv.commit(failed)
        assert kv.get("t/new") is None and kv.get("t/old") == b"x"
        ok = Txn(
            checks={"t/guard": b"v1", "t/absent": None},
            puts={"t/new/deep": b"n"},
            deletes=["t/old"],
        )
        assert kv.commit(ok)
        assert kv.get("t/new/deep") == b"n" and kv.get("t/old") is None

    def test_list_prefix_lists_descendants_only(self, kv):
        kv.put("p/one", b"1")
        kv.put("p/two/three", b"3")
        kv.put("pp/other", b"x")
        assert kv.list_prefix("p") == {"p/one": b"1", "p/two/three": b"3"}
        assert kv.list_prefix("nothing") == {}

    @pytest.mark.parametrize("key", ["", "/a", "a//b", "a/../b", "a/"])
    def test_invalid_keys_are_rejected(self, kv, key):
        with pytest.raises(KVError):
            kv.put(key, b"x")
