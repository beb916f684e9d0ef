"""pymilvus 3 (3.0.2, unmodified, in its own virtualenv: the project pins pymilvus 2.6) runs
the common Milvus 2.6 workflows against a Vectide standalone, orders queries and searches by
fields, and groups and aggregates query rows (Milvus 3.0's query aggregation), while a search
grouped by several fields is refused by name (tests/clients/pymilvus3/flow.py)."""

from __future__ import annotations

import uuid

import pytest

from tests.clients.install import run_flow


@pytest.fixture(scope="module")
def observed(standalone) -> dict:
    return run_flow("pymilvus3", standalone.uri, f"p3_{uuid.uuid4().hex[:8]}")


def test_rows_go_in_and_come_back_with_nulls_and_defaults(observed):
    assert observed["version"].startswith("3.")
    assert observed["inserted"] == 400 and observed["count"] == 400
    assert [r["id"] for r in observed["queried"]] == [102, 105, 108]  # n > 100 only where set
    assert all(
        r["extra"] == 2 * r["id"] and r["tags"] == [r["id"], r["id"] + 1]
        for r in observed["queried"]
    )
    got = {r["id"]: (r["title"], r["n"]) for r in observed["got"]}
    assert got == {1: ("up", 7), 5: (None, 7)}  # the upsert, a null, the default


def test_searches_of_every_kind(observed):
    assert observed["searched"][0] == [42, 84]  # itself first, its dynamic key with it
    assert observed["groups"] == 3 and observed["ranged"]
    assert observed["hybrid"] == 42
    assert observed["search_iterator"] == 120 and observed["query_iterator"]
    assert not [w for w in observed["warnings"] if "mvccTs" in w]


def test_partitions_deletes_reloads_and_added_fields(observed):
    assert observed["partition"] == [10_000]
    assert observed["after_delete"] == 401 - 10
    assert observed["loaded"].endswith("Loaded") and observed["after_reload"] == 42
    assert observed["added"] is None


def test_queries_and_searches_ordered_by_fields(observed):
    # titles descending: the null ones first (15, 20, 25, 30, 35, ties by id), then t39, t38
    assert observed["order_by"] == [35, 39, 38]
    ordered = observed["search_order_by"]
    assert 42 in ordered and ordered == sorted(ordered, reverse=True)  # extra = 2 * id


def test_queries_group_and_aggregate_rows(observed):
    # rows 10..39 (0..9 deleted): n is the id when it divides by 3, else the default 7;
    # titles are null when the id divides by 5
    rows = [(i, i if i % 3 == 0 else 7, None if i % 5 == 0 else f"t{i}") for i in range(10, 40)]
    expected = []
    for n in sorted({n for _, n, _ in rows}):
        ids = [i for i, m, _ in rows if m == n]
        titles = [t for i, m, t in rows if m == n and t is not None]
        expected.append(
            {
                "n": n,
                "count(*)": len(ids),
                "count(title)": len(titles),
                "max(title)": max(titles) if titles else None,
                "avg(id)": sum(ids) / len(ids),
            }
        )
    assert observed["group_by_fields"] == expected
    assert observed["aggregated"] == {"count(title)": 24, "sum(id)": sum(range(10, 40))}
    assert "group_by_fields" in observed["search_group_by_fields"]  # several: refused
