"""A leader keeps the deletes it applied for a bounded stamp window only: a single node that
never moves a segment must not hold every delete it ever met. A segment whose deltalogs end
before the window is refused (planned again), never served without deletes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_querynode import DIM, VCH, collection, delete, insert, pack, query
from vectide.services.common.errors import MilvusError
from vectide.services.common.segment import SegmentInfo, SegmentState
from vectide.services.common.timestamp import compose
from vectide.services.querynode.core import QueryNode
from vectide.services.querynode.shard import REMOVALS_WINDOW_MS

T0 = 1_700_000_000_000  # physical ms


def stamp(offset_ms: int) -> int:
    return compose(T0 + offset_ms)


def test_removals_older_than_the_window_are_dropped_and_loads_before_them_refused():
    node = QueryNode(1, chunk_rows=256)
    node.watch(collection(), VCH)
    shard = node._shards[VCH]
    rows = insert([1, 2, 3], stamp(0), np.zeros((3, DIM)))
    node.apply(VCH, pack(stamp(0), stamp(1), rows, delete([1], stamp(1))))
    node.apply(VCH, pack(stamp(1), stamp(2000), delete([2], stamp(2000))))
    assert [m.ts for m in shard.removals] == [stamp(1), stamp(2000)]
    later = REMOVALS_WINDOW_MS + 1500
    node.apply(VCH, pack(stamp(2000), stamp(later), delete([3], stamp(later))))
    assert [m.ts for m in shard.removals] == [stamp(2000), stamp(later)]
    assert shard.removals_floor == stamp(1)
    assert [m.ts for m in shard.removals_since(stamp(1))] == [stamp(2000), stamp(later)]
    with pytest.raises(MilvusError, match="no longer holds the deletes"):
        shard.removals_since(stamp(0))
    assert query(node, stamp(later)) == []  # the deletes themselves stay applied
    moved = SegmentInfo(9, 7, 1, VCH, SegmentState.FLUSHED)
    with pytest.raises(MilvusError, match="no longer holds the deletes"):
        node.load_segment(VCH, moved, deltalogs=[], since_ts=stamp(0))
    assert 9 not in shard.sealed
