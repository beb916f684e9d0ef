"""Score bands (range search, the search iterator's pages) without a server."""

import math

import numpy as np
import pytest

from vectide.services.common.errors import MilvusError
from vectide.services.common.search_range import LAST_BOUND, ScoreBand, band_of, distances
from vectide.services.proxy.search_iterator import IteratorPage, iterator_page, page_params


def kept(metric, params, scores):
    band = band_of(metric, params)
    return np.asarray(scores)[band.keep(distances(metric, np.asarray(scores)))].tolist()


def test_no_band_params_is_a_plain_search():
    assert band_of("L2", {"ef": 64}) is None


def test_l2_keeps_range_filter_inclusive_to_radius_exclusive():
    assert kept("L2", {"radius": 3.0, "range_filter": 1.0}, [0.5, 1.0, 2.0, 3.0, 4.0]) == [1.0, 2.0]
    assert kept("L2", {"radius": 3.0}, [0.5, 3.0]) == [0.5]


@pytest.mark.parametrize("metric", ["IP", "COSINE"])
def test_similarities_keep_radius_exclusive_to_range_filter_inclusive(metric):
    params = {"radius": 0.2, "range_filter": 0.8}
    assert kept(metric, params, [0.9, 0.8, 0.5, 0.2, 0.1]) == [0.8, 0.5]


def test_the_iterator_bound_keeps_only_worse_hits():
    assert kept("L2", {LAST_BOUND: 2.0}, [1.0, 2.0, 3.0]) == [3.0]
    assert kept("IP", {LAST_BOUND: 0.5}, [0.9, 0.5, 0.1]) == [0.1]


@pytest.mark.parametrize(
    "metric,params",
    [
        ("L2", {"radius": 1.0, "range_filter": 2.0}),
        ("L2", {"radius": 1.0, "range_filter": 1.0}),
        ("IP", {"radius": 0.9, "range_filter": 0.1}),
        ("L2", {"radius": "wide"}),
        ("L2", {"radius": math.nan}),
    ],
)
def test_bands_that_cannot_hold_a_hit_or_are_not_numbers_are_refused(metric, params):
    with pytest.raises(MilvusError):
        band_of(metric, params)


def test_a_default_band_keeps_everything():
    assert ScoreBand().keep(np.array([-1e30, 0.0, 1e30])).all()


def test_iterator_pages_carry_their_bound_to_the_query_nodes():
    assert iterator_page({"topk": 10}) is None
    first = iterator_page({"search_iter_v2": True, "search_iter_batch_size": 10})
    assert first is not None and first.last_bound is None and first.token
    assert page_params(first, {"ef": 8}) == {"ef": 8}
    later = iterator_page({"search_iter_v2": True, LAST_BOUND: 0.25, "search_iter_id": "t1"})
    assert later == IteratorPage("t1", 0.25)
    assert page_params(later, {"ef": 8}) == {"ef": 8, LAST_BOUND: 0.25}
    with pytest.raises(MilvusError):
        iterator_page({"search_iter_v2": True, LAST_BOUND: "x"})
