"""RANDOM_SAMPLE(factor) (Milvus 2.6's random sampling filter): where the parser takes it,
how a store's rows are sampled, and reads through the fault harness's whole cluster."""

from __future__ import annotations

import numpy as np
import pytest

from vectide.services.common.errors import MilvusError
from vectide.services.common.expr import ExprError, parse
from vectide.services.common.expr.parser import And, Compare, Field, Literal, split_sample
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.proxy.dql import QuerySpec, SearchSpec
from vectide.services.querynode.reads import sample_rows
from vectide.services.testing import VECTOR_FIELD, Harness


@pytest.mark.parametrize(
    ("text", "rest", "factor"),
    [
        ("RANDOM_SAMPLE(0.1)", None, 0.1),
        ("random_sample(0.5)", None, 0.5),
        ("id > 1 and RANDOM_SAMPLE(0.2)", "id > 1", 0.2),
        ("(id > 1 && random_sample(0.2))", "id > 1", 0.2),
        ("id > 1 and (id < 9 and RANDOM_SAMPLE(0.3))", "id > 1 and id < 9", 0.3),
        ("id > 1", "id > 1", None),
    ],
)
def test_the_sample_is_the_whole_filter_or_the_last_condition_of_its_top_level_and(
    text: str, rest: str | None, factor: float | None
) -> None:
    got_rest, got_factor = split_sample(parse(text))
    assert got_factor == factor
    assert got_rest == (None if rest is None else parse(rest))


def test_a_template_gives_the_factor() -> None:
    tree = parse("id < 5 and random_sample({f})", {"f": 0.25})
    assert split_sample(tree) == (Compare("<", Field("id"), Literal(5)), 0.25)
    assert isinstance(parse("id < 5 and id > 1 and random_sample(0.5)"), And)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RANDOM_SAMPLE(0.1) and id > 1", "last condition of the filter's top-level 'and'"),
        ("id > 1 or RANDOM_SAMPLE(0.1)", "last condition"),
        ("not RANDOM_SAMPLE(0.1)", "last condition"),
        ("(id > 1 and random_sample(0.1)) and id < 9", "last condition"),
        ("RANDOM_SAMPLE(0.3) and RANDOM_SAMPLE(0.5)", "last condition"),
        ("RANDOM_SAMPLE(1)", "between 0 and 1 (both excluded), got 1"),
        ("RANDOM_SAMPLE(0)", "between 0 and 1"),
        ("RANDOM_SAMPLE(-0.5)", "between 0 and 1"),
        ("RANDOM_SAMPLE(true)", "between 0 and 1"),
        ("RANDOM_SAMPLE('0.5')", "between 0 and 1"),
        ("RANDOM_SAMPLE(id)", "needs a constant sample factor"),
        ("RANDOM_SAMPLE()", "unexpected ')'"),
    ],
)
def test_misplaced_samples_and_bad_factors_are_refused(text: str, message: str) -> None:
    with pytest.raises(ExprError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_a_sample_is_a_sorted_subset_of_factor_times_the_rows_on_average() -> None:
    rng = np.random.default_rng(7)
    rows = np.arange(0, 2000, 2)
    picked = sample_rows(rows, 0.1, rng)
    assert len(picked) == 100  # 0.1 x 1000 exactly: no fraction to round
    assert np.all(np.diff(picked) > 0) and set(picked) <= set(rows)
    assert len({tuple(sample_rows(rows, 0.1, rng)) for _ in range(5)}) == 5  # random each time
    # 3 rows at 0.5: one or two, two half the time, so counts over many segments add up
    counts = [len(sample_rows(np.arange(3), 0.5, rng)) for _ in range(4000)]
    assert set(counts) == {1, 2}
    assert abs(np.mean(counts) - 1.5) < 0.05
    assert len(sample_rows(np.arange(0), 0.5, rng)) == 0


def _query(h: Harness, expr: str, **params: object) -> list[int]:
    spec = QuerySpec(
        collection_name="c",
        expr=expr,
        expr_params=dict(params),
        use_default_consistency=False,
        consistency_level=ConsistencyLevel.STRONG,
        limit=16384,
    )
    return sorted(int(pk) for pk in h.proxy.query(spec)[1].pks)


def test_queries_sample_each_segment_after_the_rest_of_the_filter_and_deletes_refuse_it():
    h = Harness()
    h.create_collection("c")
    h.insert("c", range(600))
    h.proxy.flush(["c"])
    for _ in range(3):
        h.step()  # a sealed segment of 600 rows handed off, then 400 growing ones
    h.insert("c", range(600, 1000))
    h.tick()
    h.pump()
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    [shard] = node._shards.values()
    assert [s.num_rows for s in shard.sealed.values()] == [600]
    first = _query(h, "RANDOM_SAMPLE(0.1)")
    assert len(first) == 100 and set(first) <= set(range(1000))
    assert len(set(first) & set(range(600))) == 60  # a tenth of each segment
    assert _query(h, "RANDOM_SAMPLE(0.1)") != first
    kept = _query(h, "id >= 500 and id < 700 and random_sample({f})", f=0.5)
    assert len(kept) == 100 and all(500 <= k < 700 for k in kept)
    spec = SearchSpec(
        collection_name="c",
        expr="id < 500 and RANDOM_SAMPLE(0.1)",
        use_default_consistency=False,
        consistency_level=ConsistencyLevel.STRONG,
        vectors=np.full((1, 4), 10, np.float32),  # the harness collection is 4-d
        anns_field=VECTOR_FIELD,
        metric_type="L2",
        limit=200,
    )
    hits = [int(pk) for pk in h.proxy.search(spec)[1].pks]
    assert len(hits) == 50 and all(k < 500 for k in hits)  # searched among the sample
    with pytest.raises(MilvusError, match="delete does not take random_sample"):
        h.proxy.delete("c", "", "id < 10 and RANDOM_SAMPLE(0.5)", {})
    with pytest.raises(MilvusError, match="last condition") as err:
        _query(h, "RANDOM_SAMPLE(0.5) and id < 10")
    assert err.value.code == 1100
    assert len(_query(h, "id >= 0")) == 1000  # nothing was deleted
