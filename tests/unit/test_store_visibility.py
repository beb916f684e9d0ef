"""A shard store answers "which rows does a read at this snapshot see" without a pass over
every row's stamps when the snapshot is past every insert and before every delete; it must
give the same rows as the pass in every state rows go through."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_querynode import DIM, collection, delete, insert
from vectide.services.querynode.segment import ShardStore, _seen


def reference(store: ShardStore, snapshot: int, partitions: list[int] | None) -> np.ndarray:
    return _seen(
        store._insert_ts.view(),
        store._deleted_at.view(),
        store._partition.view(),
        snapshot,
        partitions,
    )


def in_partition(ids: np.ndarray, ts: int, partition_id: int):
    msg = insert(ids, ts, np.ones((len(ids), DIM), np.float32))
    msg.partition_id = partition_id
    return msg


@pytest.mark.parametrize("seed", range(6))
def test_candidates_match_the_pass_over_stamps_through_every_change(seed: int) -> None:
    rng = np.random.default_rng(seed)
    store = ShardStore(collection().schema, chunk_rows=16)
    next_id, ts = 0, 10
    for _ in range(60):
        action = rng.integers(5)
        ts += int(rng.integers(1, 4))
        if action <= 1 or store.num_rows == 0:
            n = int(rng.integers(1, 12))
            # stamps of one message may run ahead of later ones (two proxies on a channel)
            stamp = ts + int(rng.integers(0, 6))
            store.insert(in_partition(np.arange(next_id, next_id + n), stamp, int(rng.integers(2))))
            next_id += n
        elif action == 2:
            store.delete(delete(rng.integers(0, next_id, 3), ts))
        elif action == 3:
            store.hide(rng.integers(0, store.num_rows, int(rng.integers(1, 20))))
            if rng.integers(2):
                store.free_hidden_head()
        else:
            store.drop_partition(int(rng.integers(2)), ts)
        for snapshot in (ts - 5, ts, ts + 10):
            for partitions in (None, [0], [1]):
                got = store.candidates(snapshot, partitions).mask
                assert np.array_equal(got, reference(store, snapshot, partitions))


def test_a_read_past_every_insert_sees_every_row_and_a_delete_ends_that() -> None:
    store = ShardStore(collection().schema)
    store.insert(in_partition(np.arange(5), 10, 0))
    assert store.candidates(10).mask.all() and not store.candidates(9).mask.any()
    store.delete(delete([3], 12))
    assert store.candidates(11).mask.all()
    assert store.candidates(12).mask.tolist() == [True, True, True, False, True]
