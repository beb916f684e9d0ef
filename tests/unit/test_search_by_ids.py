"""Search by primary keys (pymilvus ``search(ids=...)``): the stored vectors of the given
rows are the queries, through the proxy and query node on the fault harness."""

from __future__ import annotations

from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import milvus_pb2

from benchmarks.search_path import Context
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness


def search(service: MilvusService, ids: list, limit: int = 2, **kw) -> milvus_pb2.SearchResults:
    request = Prepare.search_requests_with_expr(
        collection_name="c",
        anns_field="vec",
        param={"metric_type": "L2", "params": {}},
        limit=limit,
        ids=ids,
        **kw,
    )
    return service.Search(request, Context())


def test_the_rows_of_the_keys_are_the_queries_in_the_order_given():
    h = Harness()
    h.create_collection("c")
    h.insert("c", range(10))
    h.tick()
    h.pump()
    service = MilvusService(h.proxy)
    reply = search(service, [7, 2])
    assert reply.status.code == 0, reply.status
    results = reply.results
    assert results.num_queries == 2 and list(results.topks) == [2, 2]
    ids = list(results.ids.int_id.data)
    assert ids[:2] == [7, 6] or ids[:2] == [7, 8]  # itself first, then a neighbour
    assert ids[2] == 2 and ids[3] in (1, 3)
    assert results.scores[0] == 0.0 and results.scores[2] == 0.0
    missing = search(service, [3, 40, 41])
    assert missing.status.code == 1100 and "[40, 41]" in missing.status.reason
    filtered = search(service, [5], limit=3, expr="id > 5")  # the filter bounds the hits only
    assert filtered.status.code == 0 and 5 not in filtered.results.ids.int_id.data
