"""The RESTful API in cluster mode: every proxy process serves it on its own port (listed by
`vectide status --json`), and what one proxy's REST API writes, another's reads."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import requests

from tests.integration.conftest import vectide_status
from vectide.services.common.objectstore import ObjectStore

DIM = 4


def test_each_proxy_serves_rest_and_they_agree(cluster):
    roles = {r["name"]: r for r in vectide_status(cluster.config)["roles"]}
    first = cluster.config.service.http_port
    bases = [roles[f"proxy-{i}"]["rest"] for i in range(2)]
    assert bases == [f"http://127.0.0.1:{first + i}/v2/vectordb" for i in range(2)]
    assert all(r["rest"] == "-" for r in roles.values() if r["role"] != "proxy")

    def post(base: str, path: str, body: dict) -> object:
        reply = requests.post(f"{base}/{path}", json=body, timeout=60).json()
        assert reply["code"] == 0, reply
        return reply["data"]

    create = {"collectionName": "rest_cluster", "dimension": DIM, "metricType": "L2"}
    post(bases[0], "collections/create", create)
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 0.0]} for i in range(10)]
    post(bases[1], "entities/insert", {"collectionName": "rest_cluster", "data": rows})
    search = {
        "collectionName": "rest_cluster",
        "data": [[3.1, 0.0, 0.0, 0.0]],
        "limit": 2,
        "consistencyLevel": "Strong",
    }
    hits = post(bases[0], "entities/search", search)
    assert [h["id"] for h in hits] == [3, 4]
    post(bases[1], "collections/drop", {"collectionName": "rest_cluster"})
    assert post(bases[0], "collections/has", {"collectionName": "rest_cluster"}) == {"has": False}


def test_an_import_one_proxy_runs_is_followed_through_another(cluster):
    """The job's record is datacoord's (over the internal RPC), so any proxy answers for it."""
    first = cluster.config.service.http_port
    bases = [f"http://127.0.0.1:{first + i}/v2/vectordb" for i in range(2)]
    post = _post
    post(bases[0], "collections/create", {"collectionName": "bulk", "dimension": DIM})
    bucket = ObjectStore(replace(cluster.config.s3, root_path=""))
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 0.0]} for i in range(300)]
    bucket.put("bulk/rows.json", json.dumps({"rows": rows}).encode())
    body = {"collectionName": "bulk", "files": [["bulk/rows.json"]]}
    job = post(bases[0], "jobs/import/create", body)["jobId"]
    deadline = time.monotonic() + 60
    while (got := post(bases[1], "jobs/import/describe", {"jobId": job}))["state"] != "Completed":
        assert got["state"] != "Failed" and time.monotonic() < deadline, got
        time.sleep(0.2)
    assert got["importedRows"] == 300
    listed = post(bases[1], "jobs/import/list", {"collectionName": "bulk"})["records"]
    assert [r["jobId"] for r in listed] == [job]
    count = {"collectionName": "bulk", "outputFields": ["count(*)"], "consistencyLevel": "Strong"}
    assert post(bases[1], "entities/query", count) == [{"count(*)": 300}]


def _post(base: str, path: str, body: dict) -> object:
    reply = requests.post(f"{base}/{path}", json=body, timeout=60).json()
    assert reply["code"] == 0, reply
    return reply["data"]
