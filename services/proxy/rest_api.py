"""Milvus's RESTful API v2 (``POST /v2/vectordb/{category}/{action}``) over the gRPC service.

As Milvus's own REST server does, every handler builds the protobuf request a gRPC client
would send and calls the same :class:`MilvusService` method, then shapes the reply as
Milvus's REST server does: ``{"code": 0, "data": ...}`` or ``{"code": n, "message": ...}``.
So REST and gRPC share one implementation of every semantic (validation, consistency,
databases, aliases, errors). No HTTP here: ``handle`` takes a path, a body and headers, and
``rest.py`` serves it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from services.common.errors import Code, MilvusError
from services.common.names import DEFAULT_DB
from services.proxy import rest_body as rb
from services.proxy.grpc_service import MilvusService
from services.proxy.rest_collections import CollectionHandlers
from services.proxy.rest_entities import EntityHandlers

log = logging.getLogger(__name__)

#: the header a client sets to ``false`` to get int64 values as strings (JavaScript)
ALLOW_INT64_HEADER = "Accept-Type-Allow-Int64"


class RestContext:
    """What the gRPC handlers read from a ``grpc.ServicerContext``: the database header
    pymilvus sends (``dbname``) and the time left (none: REST requests have no deadline)."""

    def __init__(self, db_name: str) -> None:
        self._metadata = (("dbname", db_name),)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        return None


@dataclass
class RestCall:
    """One request: its body, database and how int64 values are rendered."""

    body: dict[str, Any]
    db_name: str
    int64_as_number: bool = True

    @property
    def collection(self) -> str:
        return rb.get(self.body, "collectionName", str)


Handler = Callable[[RestCall], Any]


def status_of(response: Any) -> common_pb2.Status:
    return response if isinstance(response, common_pb2.Status) else response.status


class RestApi:
    def __init__(self, service: MilvusService) -> None:
        self._service = service
        self.routes: dict[str, Handler] = {
            **_prefixed("collections", CollectionHandlers(self).routes()),
            **_prefixed("entities", EntityHandlers(self).routes()),
            **_prefixed("partitions", self._partition_routes()),
            **_prefixed("indexes", self._index_routes()),
            **_prefixed("databases", self._database_routes()),
            **_prefixed("aliases", self._alias_routes()),
        }

    def handle(self, path: str, raw: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """The reply to ``POST path``: never raises, every failure is a Milvus code.
        ``headers`` is case-insensitive when it comes from the HTTP server."""
        try:
            handler = self.routes.get(path)
            if handler is None:
                raise MilvusError(Code.UNIMPLEMENTED, f"no such RESTful v2 endpoint: {path}")
            body = rb.parse_body(raw)
            db = rb.get(body, "dbName", str, "") or headers.get("DB-Name", "") or DEFAULT_DB
            allow = headers.get(ALLOW_INT64_HEADER, "true").strip().lower() != "false"
            data = handler(RestCall(body, db, allow))
        except MilvusError as exc:
            return {"code": int(exc.code), "message": exc.message}
        except Exception as exc:  # a bug must not become a 500 with a traceback
            log.exception("REST request failed", extra={"path": path})
            return {"code": int(Code.SERVICE_INTERNAL), "message": f"{type(exc).__name__}: {exc}"}
        return data if isinstance(data, dict) and "code" in data else {"code": 0, "data": data}

    def call(self, method: str, request: Any, db_name: str) -> Any:
        """``MilvusService.<method>(request)``; a failed status raises it as a MilvusError."""
        response = getattr(self._service, method)(request, RestContext(db_name))
        status = status_of(response)
        if status.code or status.error_code:
            try:
                code = Code(status.code)
            except ValueError:
                code = Code.UNEXPECTED
            raise MilvusError(code, status.reason)
        return response

    def schema(self, call: RestCall, name: str | None = None) -> schema_pb2.CollectionSchema:
        request = milvus_pb2.DescribeCollectionRequest(collection_name=name or call.collection)
        return self.call("DescribeCollection", request, call.db_name).schema

    # -- partitions ------------------------------------------------------------------------

    def _partition_routes(self) -> dict[str, Handler]:
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
                self.call(
                    "ShowPartitions",
                    milvus_pb2.ShowPartitionsRequest(collection_name=c.collection),
                    c.db_name,
                ).partition_names
            ),
            "has": lambda c: {
                "has": self.call(
                    "HasPartition", req(c, milvus_pb2.HasPartitionRequest), c.db_name
                ).value
            },
            "create": lambda c: self._empty(
                "CreatePartition", req(c, milvus_pb2.CreatePartitionRequest), c
            ),
            "drop": lambda c: self._empty(
                "DropPartition", req(c, milvus_pb2.DropPartitionRequest), c
            ),
            "load": lambda c: self._empty(
                "LoadPartitions", names(c, milvus_pb2.LoadPartitionsRequest), c
            ),
            "release": lambda c: self._empty(
                "ReleasePartitions", names(c, milvus_pb2.ReleasePartitionsRequest), c
            ),
        }

    # -- indexes ---------------------------------------------------------------------------

    def _index_routes(self) -> dict[str, Handler]:
        return {
            "create": self._create_indexes,
            "describe": self._describe_index,
            "list": self._list_indexes,
            "drop": lambda c: self._empty(
                "DropIndex",
                milvus_pb2.DropIndexRequest(
                    collection_name=c.collection,
                    index_name=rb.get(c.body, "indexName", str),
                ),
                c,
            ),
        }

    def _create_indexes(self, call: RestCall) -> dict[str, Any]:
        self.create_indexes(call, rb.get(call.body, "indexParams", list))
        return {}

    def create_indexes(self, call: RestCall, specs: list[Any]) -> None:
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
            self.call("CreateIndex", request, call.db_name)

    def _describe_index(self, call: RestCall) -> list[dict[str, Any]]:
        request = milvus_pb2.DescribeIndexRequest(
            collection_name=call.collection, index_name=rb.get(call.body, "indexName", str)
        )
        response = self.call("DescribeIndex", request, call.db_name)
        return [_index_info(d) for d in response.index_descriptions]

    def _list_indexes(self, call: RestCall) -> list[str]:
        request = milvus_pb2.DescribeIndexRequest(collection_name=call.collection)
        try:
            response = self.call("DescribeIndex", request, call.db_name)
        except MilvusError as exc:
            if exc.code == Code.INDEX_NOT_FOUND:
                return []
            raise
        return [d.index_name for d in response.index_descriptions]

    # -- databases and aliases -------------------------------------------------------------

    def _database_routes(self) -> dict[str, Handler]:
        def named(call: RestCall) -> str:
            return rb.get(call.body, "dbName", str)

        def props(call: RestCall) -> list[common_pb2.KeyValuePair]:
            return rb.key_values(rb.get(call.body, "properties", dict, {}))

        def describe(call: RestCall) -> dict[str, Any]:
            request = milvus_pb2.DescribeDatabaseRequest(db_name=named(call))
            info = self.call("DescribeDatabase", request, call.db_name)
            return {"dbName": info.db_name, "dbID": info.dbID, "properties": _kvs(info.properties)}

        return {
            "create": lambda c: self._empty(
                "CreateDatabase",
                milvus_pb2.CreateDatabaseRequest(db_name=named(c), properties=props(c)),
                c,
            ),
            "drop": lambda c: self._empty(
                "DropDatabase", milvus_pb2.DropDatabaseRequest(db_name=named(c)), c
            ),
            "alter": lambda c: self._empty(
                "AlterDatabase",
                milvus_pb2.AlterDatabaseRequest(db_name=named(c), properties=props(c)),
                c,
            ),
            "describe": describe,
            "list": lambda c: list(
                self.call("ListDatabases", milvus_pb2.ListDatabasesRequest(), c.db_name).db_names
            ),
        }

    def _alias_routes(self) -> dict[str, Handler]:
        def alias(call: RestCall) -> str:
            return rb.get(call.body, "aliasName", str)

        def describe(call: RestCall) -> dict[str, Any]:
            request = milvus_pb2.DescribeAliasRequest(alias=alias(call))
            reply = self.call("DescribeAlias", request, call.db_name)
            return {
                "dbName": reply.db_name,
                "collectionName": reply.collection,
                "aliasName": reply.alias,
            }

        def listing(call: RestCall) -> list[str]:
            name = rb.get(call.body, "collectionName", str, "")
            request = milvus_pb2.ListAliasesRequest(collection_name=name)
            return list(self.call("ListAliases", request, call.db_name).aliases)

        def pair(call: RestCall, proto: type) -> Any:
            return proto(collection_name=call.collection, alias=alias(call))

        return {
            "create": lambda c: self._empty(
                "CreateAlias", pair(c, milvus_pb2.CreateAliasRequest), c
            ),
            "alter": lambda c: self._empty("AlterAlias", pair(c, milvus_pb2.AlterAliasRequest), c),
            "drop": lambda c: self._empty(
                "DropAlias", milvus_pb2.DropAliasRequest(alias=alias(c)), c
            ),
            "describe": describe,
            "list": listing,
        }

    def _empty(self, method: str, request: Any, call: RestCall) -> dict[str, Any]:
        """A call whose REST reply is ``{"code": 0, "data": {}}``."""
        self.call(method, request, call.db_name)
        return {}


def _prefixed(category: str, routes: dict[str, Handler]) -> dict[str, Handler]:
    return {f"/v2/vectordb/{category}/{action}": h for action, h in routes.items()}


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
