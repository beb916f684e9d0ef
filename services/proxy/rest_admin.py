"""RESTful v2 ``/partitions``, ``/indexes``, ``/databases`` and ``/aliases``: each action is
one MilvusService call with the reply Milvus's REST server gives (``{}`` for most)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.proxy import rest_body as rb

if TYPE_CHECKING:
    from vectide.services.proxy.rest_call import Handler, RestCall, RestCaller

# -- partitions ------------------------------------------------------------------------


def partition_routes(api: RestCaller) -> dict[str, Handler]:
    def req(call: RestCall, proto: type) -> Any:
        return proto(
            collection_name=call.collection,
            partition_name=rb.get(call.body, "partitionName", str),
        )

    def names(call: RestCall, proto: type) -> Any:
        parts = rb.name_list(call.body, "partitionNames")
        return proto(collection_name=call.collection, partition_names=parts)

    return {
        "list": lambda c: list(
            api.call(
                "ShowPartitions",
                milvus_pb2.ShowPartitionsRequest(collection_name=c.collection),
                c.db_name,
            ).partition_names
        ),
        "has": lambda c: {
            "has": api.call("HasPartition", req(c, milvus_pb2.HasPartitionRequest), c.db_name).value
        },
        "create": lambda c: api.empty(
            "CreatePartition", req(c, milvus_pb2.CreatePartitionRequest), c
        ),
        "drop": lambda c: api.empty("DropPartition", req(c, milvus_pb2.DropPartitionRequest), c),
        "load": lambda c: api.empty(
            "LoadPartitions", names(c, milvus_pb2.LoadPartitionsRequest), c
        ),
        "release": lambda c: api.empty(
            "ReleasePartitions", names(c, milvus_pb2.ReleasePartitionsRequest), c
        ),
        "get_stats": lambda c: row_count(
            api.call(
                "GetPartitionStatistics",
                req(c, milvus_pb2.GetPartitionStatisticsRequest),
                c.db_name,
            ).stats
        ),
    }


def row_count(stats: Iterable[common_pb2.KeyValuePair]) -> dict[str, int]:
    """A statistics reply's ``row_count`` as Milvus's REST server returns it."""
    return {"rowCount": int(next((kv.value for kv in stats if kv.key == "row_count"), "0"))}


# -- indexes ---------------------------------------------------------------------------


def index_routes(api: RestCaller) -> dict[str, Handler]:
    return {
        "create": lambda c: _create_indexes(api, c),
        "describe": lambda c: _describe_index(api, c),
        "list": lambda c: _list_indexes(api, c),
        "drop": lambda c: api.empty(
            "DropIndex",
            milvus_pb2.DropIndexRequest(
                collection_name=c.collection,
                index_name=rb.get(c.body, "indexName", str),
            ),
            c,
        ),
        "alter_properties": lambda c: api.empty(
            "AlterIndex",
            milvus_pb2.AlterIndexRequest(
                collection_name=c.collection,
                index_name=rb.get(c.body, "indexName", str),
                extra_params=rb.key_values(rb.get(c.body, "properties", dict)),
            ),
            c,
        ),
        "drop_properties": lambda c: api.empty(
            "AlterIndex",
            milvus_pb2.AlterIndexRequest(
                collection_name=c.collection,
                index_name=rb.get(c.body, "indexName", str),
                delete_keys=rb.name_list(c.body, "propertyKeys"),
            ),
            c,
        ),
    }


def _create_indexes(api: RestCaller, call: RestCall) -> dict[str, Any]:
    create_indexes(api, call, rb.get(call.body, "indexParams", list))
    return {}


def create_indexes(api: RestCaller, call: RestCall, specs: list[Any]) -> None:
    """One CreateIndex per ``indexParams`` entry (``fieldName`` required)."""
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise rb.bad_format(f"indexParams[{i}] must be an object")
        request = milvus_pb2.CreateIndexRequest(
            collection_name=call.collection,
            field_name=rb.get(spec, "fieldName", str),
            index_name=rb.get(spec, "indexName", str, ""),
            extra_params=rb.index_extra_params(spec),
        )
        api.call("CreateIndex", request, call.db_name)


def _describe_index(api: RestCaller, call: RestCall) -> list[dict[str, Any]]:
    request = milvus_pb2.DescribeIndexRequest(
        collection_name=call.collection, index_name=rb.get(call.body, "indexName", str)
    )
    response = api.call("DescribeIndex", request, call.db_name)
    return [_index_info(d) for d in response.index_descriptions]


def _list_indexes(api: RestCaller, call: RestCall) -> list[str]:
    request = milvus_pb2.DescribeIndexRequest(collection_name=call.collection)
    try:
        response = api.call("DescribeIndex", request, call.db_name)
    except MilvusError as exc:
        if exc.code == Code.INDEX_NOT_FOUND:
            return []
        raise
    return [d.index_name for d in response.index_descriptions]


# -- databases and aliases -------------------------------------------------------------


def database_routes(api: RestCaller) -> dict[str, Handler]:
    def named(call: RestCall) -> str:
        return rb.get(call.body, "dbName", str)

    def props(call: RestCall) -> list[common_pb2.KeyValuePair]:
        return rb.key_values(rb.get(call.body, "properties", dict, {}))

    def describe(call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.DescribeDatabaseRequest(db_name=named(call))
        info = api.call("DescribeDatabase", request, call.db_name)
        return {"dbName": info.db_name, "dbID": info.dbID, "properties": _kvs(info.properties)}

    return {
        "create": lambda c: api.empty(
            "CreateDatabase",
            milvus_pb2.CreateDatabaseRequest(db_name=named(c), properties=props(c)),
            c,
        ),
        "drop": lambda c: api.empty(
            "DropDatabase", milvus_pb2.DropDatabaseRequest(db_name=named(c)), c
        ),
        "alter": lambda c: api.empty(
            "AlterDatabase",
            milvus_pb2.AlterDatabaseRequest(db_name=named(c), properties=props(c)),
            c,
        ),
        "describe": describe,
        "list": lambda c: list(
            api.call("ListDatabases", milvus_pb2.ListDatabasesRequest(), c.db_name).db_names
        ),
    }


def alias_routes(api: RestCaller) -> dict[str, Handler]:
    def alias(call: RestCall) -> str:
        return rb.get(call.body, "aliasName", str)

    def describe(call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.DescribeAliasRequest(alias=alias(call))
        reply = api.call("DescribeAlias", request, call.db_name)
        return {
            "dbName": reply.db_name,
            "collectionName": reply.collection,
            "aliasName": reply.alias,
        }

    def listing(call: RestCall) -> list[str]:
        name = rb.get(call.body, "collectionName", str, "")
        request = milvus_pb2.ListAliasesRequest(collection_name=name)
        return list(api.call("ListAliases", request, call.db_name).aliases)

    def pair(call: RestCall, proto: type) -> Any:
        return proto(collection_name=call.collection, alias=alias(call))

    return {
        "create": lambda c: api.empty("CreateAlias", pair(c, milvus_pb2.CreateAliasRequest), c),
        "alter": lambda c: api.empty("AlterAlias", pair(c, milvus_pb2.AlterAliasRequest), c),
        "drop": lambda c: api.empty("DropAlias", milvus_pb2.DropAliasRequest(alias=alias(c)), c),
        "describe": describe,
        "list": listing,
    }


def _kvs(pairs: Any) -> list[dict[str, str]]:
    return [{"key": kv.key, "value": kv.value} for kv in pairs]


def _index_info(d: milvus_pb2.IndexDescription) -> dict[str, Any]:
    params = {kv.key: kv.value for kv in d.params}
    return {
        "indexName": d.index_name,
        "fieldName": d.field_name,
        "indexType": params.get("index_type", ""),
        "metricType": params.get("metric_type", ""),
        "totalRows": d.total_rows,
        "pendingRows": d.pending_index_rows,
        "indexedRows": d.indexed_rows,
        "indexState": common_pb2.IndexState.Name(d.state),
        "failReason": d.index_state_fail_reason,
    }
