"""Decay rankers (services/proxy/decay.py): the curves, the normalisation, the reordering."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vectide.services.common.results import SearchHits
from vectide.services.proxy.decay import Decay, candidates, rerank


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        # d = max(0, |x - 50| - 5) for x = 50, 40, 20, 0: 0, 5, 25, 45
        ("gauss", [1.0, 0.5 ** (0.25**2), 0.5 ** (1.25**2), 0.5 ** (2.25**2)]),
        ("exp", [1.0, 0.5**0.25, 0.5**1.25, 0.5**2.25]),
        ("linear", [1.0, 0.875, 0.375, 0.0]),  # floored at 0, as Milvus's docs say
    ],
)
def test_the_curves(function, expected):
    ranker = Decay("ts", function, origin=50, scale=20, offset=5, decay=0.5)
    got = ranker.factors(np.array([50, 40, 20, 0]))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_hits_are_reordered_by_normalised_relevance_times_decay_and_cut():
    # two queries; L2 distances become 1 - 2 atan(d) / pi
    hits = SearchHits(
        "L2",
        counts=[3, 2],
        pks=np.array([1, 2, 3, 4, 5]),
        scores=np.array([0.0, 0.1, 0.2, 0.0, 0.5], np.float32),
        fields={"ts": np.array([0, 50, 45, 50, 50])},
    )
    ranker = Decay("ts", "exp", origin=50, scale=10)
    out = rerank(hits, ranker, limit=2, offset=0)
    assert out.counts == [2, 2]
    assert out.pks.tolist() == [2, 3, 4, 5]
    expected = 1 - 2 * math.atan(0.1) / math.pi
    assert out.scores[0] == pytest.approx(expected, rel=1e-6)
    assert out.fields["ts"].tolist() == [50, 45, 50, 50]
    skipped = rerank(hits, ranker, limit=2, offset=1)
    assert skipped.pks.tolist() == [3, 1, 5] and skipped.counts == [2, 1]


def test_candidates_are_ten_per_hit_asked_for_within_milvus_topk():
    assert candidates(5, 0) == 50
    assert candidates(10, 5) == 150
    assert candidates(2000, 0) == 16384


def test_hybrid_fusion_takes_the_best_normalised_score_times_the_decay():
    from vectide.services.proxy.rerank import DECAY, Cut, Ranker, fuse

    l2 = SearchHits(
        "L2", [2], np.array([1, 2]), np.array([0.0, 1.0], np.float32), {"ts": np.array([10, 0])}
    )
    ip = SearchHits(
        "IP", [2], np.array([2, 3]), np.array([0.9, 0.2], np.float32), {"ts": np.array([0, 0])}
    )
    ranker = Ranker(DECAY, decay=Decay("ts", "exp", origin=0, scale=10))
    fused = fuse([l2, ip], ranker, Cut(limit=3))
    # key 1: L2 0 -> 1.0, ts 10 -> x0.5; key 2: max(1 - 2 atan(1)/pi = 0.5, 0.9) x1; key 3: 0.2
    assert fused.pks.tolist() == [2, 1, 3]
    np.testing.assert_allclose(fused.scores, [0.9, 0.5, 0.2], rtol=1e-6)
