"""Hybrid search's fusion (services/proxy/rerank.py) against Milvus 2.6's formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vectide.services.common.errors import MilvusError
from vectide.services.common.results import SearchHits
from vectide.services.proxy.rerank import Cut, Ranker, fuse, ranker_of


def _hits(metric, pks, scores, counts=None, groups=None) -> SearchHits:
    return SearchHits(
        metric,
        counts or [len(pks)],
        np.array(pks, dtype=np.int64),
        np.array(scores, dtype=np.float32),
        {"x": np.array(pks) + 100},
        groups,
    )


def test_rrf_sums_reciprocal_ranks_and_breaks_ties_by_key():
    a = _hits("L2", [1, 2, 3], [0.1, 0.2, 0.3])
    b = _hits("IP", [3, 4, 1], [0.9, 0.8, 0.7])
    out = fuse([a, b], Ranker("rrf", k=10), Cut(limit=10))
    expected = {1: 1 / 11 + 1 / 13, 2: 1 / 12, 3: 1 / 13 + 1 / 11, 4: 1 / 12}
    # 1 and 3 tie, as do 2 and 4: the smaller key first
    assert out.pks.tolist() == [1, 3, 2, 4]
    np.testing.assert_allclose(out.scores, [expected[i] for i in [1, 3, 2, 4]], rtol=1e-6)
    assert out.fields["x"].tolist() == [101, 103, 102, 104]


def test_offset_and_limit_cut_the_fused_list_per_query():
    a = _hits("L2", [1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4], counts=[2, 2])
    b = _hits("L2", [5, 6], [0.1, 0.2], counts=[1, 1])
    out = fuse([a, b], Ranker("rrf", k=60), Cut(limit=1, offset=1))
    assert out.counts == [1, 1]
    # query 0: 1 and 5 tie at 1/61, then 2; query 1: 3 and 6 tie, then 4
    assert out.pks.tolist() == [5, 6]


def test_weighted_normalises_each_metric_as_milvus():
    l2 = _hits("L2", [1, 2], [0.5, 2.0])
    ip = _hits("IP", [2, 3], [3.0, -1.0])
    cos = _hits("COSINE", [3], [0.2])
    out = fuse([l2, ip, cos], Ranker("weighted", weights=(0.2, 0.5, 0.3)), Cut(limit=5))
    norm_l2 = lambda d: 1 - 2 * math.atan(d) / math.pi  # noqa: E731
    norm_ip = lambda s: 0.5 + math.atan(s) / math.pi  # noqa: E731
    expected = {
        1: 0.2 * norm_l2(0.5),
        2: 0.2 * norm_l2(2.0) + 0.5 * norm_ip(3.0),
        3: 0.5 * norm_ip(-1.0) + 0.3 * (1 + 0.2) / 2,
    }
    order = sorted(expected, key=lambda i: -expected[i])
    assert out.pks.tolist() == order
    np.testing.assert_allclose(out.scores, [expected[i] for i in order], rtol=1e-6)


def test_weighted_without_norm_keeps_raw_scores_and_their_direction():
    a = _hits("L2", [1, 2], [0.5, 2.0])
    b = _hits("L2", [2, 3], [1.0, 0.1])
    out = fuse([a, b], Ranker("weighted", weights=(1.0, 1.0), norm_score=False), Cut(limit=3))
    assert out.pks.tolist() == [3, 1, 2]  # distances: smaller first
    np.testing.assert_allclose(out.scores, [0.1, 0.5, 3.0], rtol=1e-6)
    # mixed metrics: L2 mapped so larger is better, IP raw
    mixed = fuse(
        [a, _hits("IP", [3], [0.4])],
        Ranker("weighted", weights=(1.0, 1.0), norm_score=False),
        Cut(limit=3),
    )
    expected = {1: 1 - 2 * math.atan(0.5) / math.pi, 2: 1 - 2 * math.atan(2.0) / math.pi, 3: 0.4}
    order = sorted(expected, key=lambda i: -expected[i])
    assert mixed.pks.tolist() == order


def test_grouped_fusion_orders_groups_and_drops_short_ones_when_strict():
    a = _hits("L2", [1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4], groups=["a", "b", "a", "c"])
    b = _hits("L2", [5, 2], [0.1, 0.2], groups=["c", "b"])
    # rrf(k=1): 1: 1/2, 5: 1/2, 2: 1/3 + 1/3, 3: 1/4, 4: 1/5
    out = fuse([a, b], Ranker("rrf", k=1), Cut(limit=2, group_size=2))
    assert out.pks.tolist() == [2, 1, 3]  # b (2/3), then a (1/2, 1/4); c left out
    assert out.groups == ["b", "a", "a"]
    strict = fuse([a, b], Ranker("rrf", k=1), Cut(limit=2, group_size=2, strict_group_size=True))
    assert strict.pks.tolist() == [1, 3]
    summed = fuse([a, b], Ranker("rrf", k=1), Cut(limit=1, group_size=2, group_scorer="sum"))
    assert summed.pks.tolist() == [1, 3]  # a: 3/4 beats b: 2/3


@pytest.mark.parametrize(
    ("strategy", "params", "message"),
    [
        ("rrf", {"k": 0}, "range"),
        ("rrf", {"k": "x"}, "number"),
        ("weighted", {"weights": [0.5]}, "mismatch"),
        ("weighted", {"weights": [0.5, 1.5]}, "range"),
        ("weighted", {}, "weights not found"),
        ("cohere", {}, "unsupported rerank strategy"),
    ],
)
def test_bad_rankers_are_refused(strategy, params, message):
    with pytest.raises(MilvusError, match=message):
        ranker_of(strategy, params, 2)


def test_ranker_of_reads_pymilvus_params():
    assert ranker_of("rrf", {}, 2) == Ranker("rrf", k=60.0)
    assert ranker_of("weighted", {"weights": [0.3, 1], "norm_score": False}, 2) == Ranker(
        "weighted", weights=(0.3, 1.0), norm_score=False
    )
