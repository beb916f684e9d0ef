"""pymilvus 3 (3.0.2, unmodified, in its own virtualenv: the project pins pymilvus 2.6) runs
the common Milvus 2.6 workflows against a Vectide standalone, orders queries and searches by
fields, and its Milvus 3.0 aggregations are refused by name (tests/clients/pymilvus3/flow.py)."""

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


def test_milvus_3_aggregations_are_refused_by_name(observed):
    assert "group_by_fields (grouping by several fields" in observed["group_by_fields"]
