"""The published Node SDK (``@zilliz/milvus2-sdk-node``, pinned in tests/clients/node) runs
its documented flow against a Vectide standalone: create, insert, index, load, search with the
primary key among the output fields (and with the SDK's default ``*``), query, delete, drop;
what Attu calls when it connects (``attu_connect.js``); a GEOMETRY field with RTREE, ``ST_*``
filters and RANDOM_SAMPLE (``geo.js``); a TIMESTAMPTZ field in a collection's time zone
(``time.js``).

The SDK is installed with ``npm ci`` from the pinned lock file into ``.vectide/node-sdk/``
on first use. ``make setup`` installs Node.js and npm; the test skips only where they are
still missing (a machine set up by hand).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients.install import installed_once
from tests.infra import REPO

CLIENT = REPO / "tests" / "clients" / "node"
SDK = "@zilliz/milvus2-sdk-node"
DIM, ROWS = 8, 50  # as flow.js


def node_modules() -> Path:
    """The pinned SDK's ``node_modules`` (``npm ci`` from the lock file, once)."""

    def npm_ci(folder: Path) -> None:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(CLIENT / name, folder / name)
        subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            check=True,
            timeout=300,
        )

    manifests = [CLIENT / "package.json", CLIENT / "package-lock.json"]
    return installed_once("node-sdk", manifests, npm_ci) / "node_modules"


@pytest.fixture(scope="module")
def node_env() -> dict[str, str]:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    return {**os.environ, "NODE_PATH": str(node_modules())}


def run_node(script: str, deployment: Any, arg: str, env: dict[str, str]) -> Any:
    """Run one of tests/clients/node against the deployment; its last stdout line is JSON."""
    address = deployment.uri.removeprefix("http://")
    done = subprocess.run(
        ["node", str(CLIENT / script), address, arg],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def vector(i: int) -> np.ndarray:
    return np.sin(i * 7 + np.arange(DIM)).astype(np.float32)


def nearest(i: int, k: int) -> list[int]:
    vectors = np.stack([vector(j) for j in range(ROWS)])
    return np.argsort(((vectors - vector(i)) ** 2).sum(axis=1), kind="stable")[:k].tolist()


def test_documented_flow(standalone, node_env):
    prefix = f"node_{uuid.uuid4().hex[:6]}"
    runs = run_node("flow.js", standalone, prefix, env=node_env)
    for pk_type, pk in (("Int64", str), ("VarChar", lambda i: f"k{i}")):
        run = runs[pk_type]
        assert run["insert_count"] == ROWS
        [hits] = run["search"] if isinstance(run["search"][0], list) else [run["search"]]
        assert [str(h["pk"]) for h in hits] == [pk(i) for i in nearest(3, 5)]
        assert [h["title"] for h in hits] == [f"title-{i}" for i in nearest(3, 5)]
        assert [h["color"] for h in hits] == ["odd" if i % 2 else "even" for i in nearest(3, 5)]
        [top, *_] = run["search_all"]  # output_fields `*`: every field, the pk included
        assert str(top["pk"]) == pk(10) and top["title"] == "title-10" and int(top["n"]) == 10
        assert np.allclose(top["vec"], vector(10))
        rows = sorted(run["query"], key=lambda r: int(r["n"]))
        assert [(str(r["pk"]), r["title"]) for r in rows] == [
            (pk(i), f"title-{i}") for i in range(5)
        ]
        # color ("even" < "odd"), then title descending ("title-8" > "title-10"): a page
        by_color = sorted(range(12), key=lambda i: f"title-{i}", reverse=True)
        by_color.sort(key=lambda i: i % 2)  # stable: titles stay descending within a color
        assert run["query_ordered"] == by_color[2:7]
        assert run["search_ordered"] == sorted(nearest(3, 5), reverse=True)
        assert run["grouped"] == [[n, 1, f"title-{n}"] for n in range(3)]
        assert run["aggregated"] == [[12, sum(range(12)), "title-9"]]  # VarChar: text order
        assert run["delete_count"] == 10 and run["count_after_delete"] == ROWS - 10
        assert run["exists_after_drop"] is False


def test_what_attu_calls_when_it_connects_and_lists(standalone, node_env):
    """Attu's server drives this SDK: connect, health, a database, its collections, their
    statistics, load state, indexes, aliases and replicas, and the system topology."""
    db = f"attu_{uuid.uuid4().hex[:6]}"
    got = run_node("attu_connect.js", standalone, db, env=node_env)
    assert got["healthy"] is True
    assert got["databases"][0] == "default" and db in got["databases"]
    assert got["collections"] == ["docs"] and got["loaded"] == [["docs", 100]]
    assert got["db_name"] == db and got["aliases_described"] == ["live"]
    assert got["row_count"] == "0" and got["load_state"] == "LoadStateLoaded"
    assert got["index_fields"] == ["vector"] and got["aliases"] == ["live"]
    assert got["replica_shards"] == [1]
    assert got["batch"] == [["docs", "Success", 2], ["ghost", "CollectionNotExists", 0]]
    assert got["index_statistics"] == [["vector", "vector"]]
    assert {"proxy", "rootcoord", "querynode"} <= set(got["metric_nodes"])


def test_a_geometry_field_with_rtree_st_filters_and_random_sample(standalone, node_env):
    got = run_node("geo.js", standalone, f"geo_{uuid.uuid4().hex[:6]}", env=node_env)
    # points (i % 10, i // 10): x in 2..3 and y in 1..2 lie inside the region
    assert got["within"] == [
        [12, "POINT (2 1)"],
        [13, "POINT (3 1)"],
        [22, "POINT (2 2)"],
        [23, "POINT (3 2)"],
    ]
    assert len(got["sample"]) == 10 and set(got["sample"]) <= set(range(20))
    # within 120 km of (0 0): itself, (1 0) and (0 1) at 111 km; (1 1) is 157 km away
    assert got["near"] == [[0, "POINT (0 0)"], [1, "POINT (1 0)"], [10, "POINT (0 1)"]]
    assert got["nulls"] == [[39, None]]


def test_a_timestamptz_field_in_a_collections_time_zone(standalone, node_env):
    got = run_node("time.js", standalone, f"time_{uuid.uuid4().hex[:6]}", env=node_env)
    # every row is 08:00 in Shanghai on January (id + 1), as text in the collection's zone
    assert got["week"] == [[i, f"2025-01-{i + 1:02d}T08:00:00+08:00"] for i in (2, 3, 4)]
    # a month later than 2025-02-07T00:00Z: days 8 and 9 of January (ids 7 and 8), nearest first
    assert got["shifted"] == [[7, "2025-01-08T08:00:00+08:00"], [8, "2025-01-09T08:00:00+08:00"]]
    assert got["nulls"] == [[9, None]]


def test_a_nullable_vector_field(standalone, node_env):
    got = run_node("nullvec.js", standalone, f"nullvec_{uuid.uuid4().hex[:6]}", env=node_env)
    assert got["near"] == [3, 5, 1, 7]  # rows with a vector only (odd ids), nearest (3.9, 1)
    assert got["rows"] == [[0, None], [1, [1.0, 1.0]], [2, None], [3, [3.0, 1.0]]]
