"""Read parameters of Milvus 3.0 features Vectide does not serve (search aggregations,
grouping a search by several fields) are refused by name, not ignored: results without
them would answer a question the client did not ask. On the fault harness, through the
servicer. (ORDER BY is served: test_order_by.py; query aggregations:
test_aggregation.py.)"""

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


def test_a_search_aggregation_is_refused(service):
    reply = service.Query(_query(search_aggregation="{}"), Context())
    assert reply.status.code == 1100 and "search_aggregation" in reply.status.reason


def test_an_empty_later_parameter_is_no_request(service):
    assert service.Query(_query(search_aggregation=""), Context()).status.code == 0
    assert service.Query(_query(group_by_fields=""), Context()).status.code == 0


def _grouped(fields: str):
    request = _search()
    request.search_params.append(common_pb2.KeyValuePair(key="group_by_fields", value=fields))
    return request


def test_a_search_groups_by_one_of_group_by_fields_and_refuses_several(service):
    reply = service.Search(_grouped("id"), Context())
    ids = list(reply.results.ids.int_id.data)
    assert reply.status.code == 0 and len(ids) == len(set(ids)) == 3
    assert reply.results.group_by_field_value.field_name == "id"  # grouped, as group_by_field
    several = service.Search(_grouped("id,id2"), Context())
    assert several.status.code == 1100 and "group_by_fields" in several.status.reason
    hybrid = Prepare.hybrid_search_request_with_ranker("c", [_search()], RRFRanker(), 3)
    hybrid.rank_params.append(common_pb2.KeyValuePair(key="group_by_fields", value="a,b"))
    assert service.HybridSearch(hybrid, Context()).status.code == 1100
