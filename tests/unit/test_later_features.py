"""Read parameters of Milvus 3.0 features (grouping by several fields, aggregations) are
refused by name, not ignored: rows without their aggregates would answer a question the
client did not ask. On the fault harness, through the servicer. (ORDER BY is served:
test_order_by.py.)"""

from __future__ import annotations

import pytest
from pymilvus import RRFRanker
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import common_pb2

from benchmarks.search_path import Context
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness


@pytest.fixture(scope="module")
def service() -> MilvusService:
    h = Harness()
    h.create_collection("c")
    h.insert("c", range(10))
    h.tick()
    h.pump()
    return MilvusService(h.proxy)


def _search(**kwargs: object):
    return Prepare.search_requests_with_expr(
        collection_name="c",
        anns_field="vec",
        param={"metric_type": "L2", "params": {}},
        limit=3,
        data=[[0.0] * 4],
        expr=None,
        **kwargs,
    )


def _query(**params: str):
    request = Prepare.query_request("c", "id >= 0", ["id"], [], limit=3)
    for key, value in params.items():
        request.query_params.append(common_pb2.KeyValuePair(key=key, value=value))
    return request


@pytest.mark.parametrize(
    "params",
    [{"group_by_fields": "id"}, {"search_aggregation": "{}"}],
)
def test_a_query_with_a_later_feature_is_refused(service, params):
    reply = service.Query(_query(**params), Context())
    assert reply.status.code == 1100 and next(iter(params)) in reply.status.reason


def test_an_empty_later_parameter_is_no_request_and_a_hybrid_search_is_checked_too(service):
    assert service.Query(_query(group_by_fields=""), Context()).status.code == 0
    hybrid = Prepare.hybrid_search_request_with_ranker("c", [_search()], RRFRanker(), 3)
    hybrid.rank_params.append(common_pb2.KeyValuePair(key="group_by_fields", value="id"))
    assert service.HybridSearch(hybrid, Context()).status.code == 1100
