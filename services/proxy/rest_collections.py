"""RESTful v2 ``/collections/*``: each action is one or a few MilvusService calls, with
the reply shaped as Milvus's REST server shapes it (``describe`` gathers the collection, its
load state and its indexes, as Milvus's does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from vectide.services.common.collection_properties import TTL_KEY
from vectide.services.common.errors import Code, MilvusError
from vectide.services.proxy import rest_admin as admin
from vectide.services.proxy import rest_body as rb

if TYPE_CHECKING:
    from vectide.services.proxy.rest_call import Handler, RestCall, RestCaller

#: the quick setup's index metric when the body names none (Milvus's REST default)
DEFAULT_METRIC = "COSINE"
#: ``params`` of a create that are collection properties, and the keys they are stored under
CREATE_PROPERTIES = {"ttlSeconds": TTL_KEY, "partitionKeyIsolation": "partitionkey.isolation"}


class CollectionHandlers:
    def __init__(self, api: RestCaller) -> None:
        self.api = api

    def routes(self) -> dict[str, Handler]:
        return {
            "create": self.create,
            "describe": self.describe,
            "list": self.list,
            "has": self.has,
            "drop": lambda c: self._simple("DropCollection", milvus_pb2.DropCollectionRequest, c),
            "load": lambda c: self._simple("LoadCollection", milvus_pb2.LoadCollectionRequest, c),
            "release": lambda c: self._simple(
                "ReleaseCollection", milvus_pb2.ReleaseCollectionRequest, c
            ),
            "get_load_state": self.load_state,
            "get_stats": self.stats,
            "rename": self.rename,
            "alter_properties": self.alter_properties,
            "drop_properties": self.drop_properties,
            "fields/add": self.add_field,
            "fields/alter_properties": self.alter_field,
        }

    def _simple(self, method: str, proto: type, call: RestCall) -> dict[str, Any]:
        self.api.call(method, proto(collection_name=call.collection), call.db_name)
        return {}

    def create(self, call: RestCall) -> dict[str, Any]:
        """Quick setup (``dimension``: schema, an index on the vector, loaded) or a full
        ``schema`` (with ``indexParams``: indexed and loaded; without: just created), as
        Milvus's REST server does."""
        body = call.body
        name = call.collection
        quick = "schema" not in body
        schema = rb.quick_schema(body, name) if quick else rb.full_schema(body, name)
        params = rb.get(body, "params", dict, {})
        request = milvus_pb2.CreateCollectionRequest(
            collection_name=name,
            schema=schema.SerializeToString(),
            shards_num=int(params.get("shardsNum", 1)),
            consistency_level=rb.level_value(params.get("consistencyLevel", "Bounded")),
            properties=rb.key_values(
                {key: params[name] for name, key in CREATE_PROPERTIES.items() if name in params}
            ),
        )
        if "partitionsNum" in params:
            request.num_partitions = int(params["partitionsNum"])
        self.api.call("CreateCollection", request, call.db_name)
        if quick:
            vector = schema.fields[1].name
            metric = rb.get(body, "metricType", str, "") or DEFAULT_METRIC
            spec = {"fieldName": vector, "indexName": vector, "metricType": metric}
            admin.create_indexes(self.api, call, [spec])
        else:
            indexes = rb.get(body, "indexParams", list, [])
            if not indexes:
                return {}
            names = {f.name for f in schema.fields}
            for spec in indexes:
                field = spec.get("fieldName") if isinstance(spec, dict) else None
                if field not in names:
                    raise rb.missing(f"`{field}` hasn't defined in schema")
            admin.create_indexes(self.api, call, indexes)
        self._simple("LoadCollection", milvus_pb2.LoadCollectionRequest, call)
        return {}

    def list(self, call: RestCall) -> list[str]:
        response = self.api.call(
            "ShowCollections", milvus_pb2.ShowCollectionsRequest(), call.db_name
        )
        return list(response.collection_names)

    def has(self, call: RestCall) -> dict[str, bool]:
        request = milvus_pb2.HasCollectionRequest(collection_name=call.collection)
        return {"has": self.api.call("HasCollection", request, call.db_name).value}

    def describe(self, call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.DescribeCollectionRequest(collection_name=call.collection)
        coll = self.api.call("DescribeCollection", request, call.db_name)
        pk = next((f for f in coll.schema.fields if f.is_primary_key), None)
        return {
            "collectionName": coll.collection_name,
            "collectionID": coll.collectionID,
            "description": coll.schema.description,
            "autoId": bool(pk and pk.autoID),
            "fields": [_field_info(f) for f in coll.schema.fields],
            "functions": [_function_info(fn) for fn in coll.schema.functions],
            "aliases": list(coll.aliases),
            "indexes": self._index_summaries(call),
            "load": self._load_state_name(call),
            "shardsNum": coll.shards_num,
            "partitionsNum": coll.num_partitions,
            "consistencyLevel": common_pb2.ConsistencyLevel.Name(coll.consistency_level),
            "enableDynamicField": coll.schema.enable_dynamic_field,
            "properties": [{"key": kv.key, "value": kv.value} for kv in coll.properties],
        }

    def _index_summaries(self, call: RestCall) -> list[dict[str, str]]:
        request = milvus_pb2.DescribeIndexRequest(collection_name=call.collection)
        try:
            response = self.api.call("DescribeIndex", request, call.db_name)
        except MilvusError:
            return []  # no index yet: Milvus's describe lists none
        out = []
        for d in response.index_descriptions:
            params = {kv.key: kv.value for kv in d.params}
            out.append(
                {
                    "fieldName": d.field_name,
                    "indexName": d.index_name,
                    "metricType": params.get("metric_type", ""),
                }
            )
        return out

    def _load_state_name(self, call: RestCall, partitions: list[str] | None = None) -> str:
        request = milvus_pb2.GetLoadStateRequest(
            collection_name=call.collection, partition_names=partitions or []
        )
        state = self.api.call("GetLoadState", request, call.db_name).state
        return common_pb2.LoadState.Name(state)

    def load_state(self, call: RestCall) -> dict[str, Any]:
        partitions = rb.name_list(call.body, "partitionNames", [])
        state = self._load_state_name(call, partitions)
        if state == "LoadStateNotExist":
            raise MilvusError(
                Code.COLLECTION_NOT_FOUND,
                f"can't find collection[collection={call.collection}]",
            )
        if state == "LoadStateNotLoad":
            return {"loadState": state}
        request = milvus_pb2.GetLoadingProgressRequest(
            collection_name=call.collection, partition_names=partitions
        )
        progress = self.api.call("GetLoadingProgress", request, call.db_name).progress
        return {
            "loadState": "LoadStateLoaded" if progress >= 100 else "LoadStateLoading",
            "loadProgress": progress,
        }

    def stats(self, call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.GetCollectionStatisticsRequest(collection_name=call.collection)
        return admin.row_count(
            self.api.call("GetCollectionStatistics", request, call.db_name).stats
        )

    def rename(self, call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.RenameCollectionRequest(
            oldName=call.collection,
            newName=rb.get(call.body, "newCollectionName", str),
            newDBName=rb.get(call.body, "newDbName", str, "") or call.db_name,
        )
        self.api.call("RenameCollection", request, call.db_name)
        return {}

    def alter_properties(self, call: RestCall) -> dict[str, Any]:
        """``properties``: an object of the keys to set (AlterCollection)."""
        properties = rb.get(call.body, "properties", dict)
        request = milvus_pb2.AlterCollectionRequest(
            collection_name=call.collection, properties=rb.key_values(properties)
        )
        self.api.call("AlterCollection", request, call.db_name)
        return {}

    def drop_properties(self, call: RestCall) -> dict[str, Any]:
        """``propertyKeys``: the keys to delete."""
        keys = rb.get(call.body, "propertyKeys", list)
        request = milvus_pb2.AlterCollectionRequest(
            collection_name=call.collection, delete_keys=[str(k) for k in keys]
        )
        self.api.call("AlterCollection", request, call.db_name)
        return {}

    def add_field(self, call: RestCall) -> dict[str, Any]:
        """``schema``: one field, written as create's ``schema.fields`` writes it
        (AddCollectionField)."""
        field = rb.field_schema(rb.get(call.body, "schema", dict), auto_id=False)
        request = milvus_pb2.AddCollectionFieldRequest(
            collection_name=call.collection, schema=field.SerializeToString()
        )
        self.api.call("AddCollectionField", request, call.db_name)
        return {}

    def alter_field(self, call: RestCall) -> dict[str, Any]:
        """``fieldName`` and ``fieldParams``: the field's keys to set (AlterCollectionField)."""
        request = milvus_pb2.AlterCollectionFieldRequest(
            collection_name=call.collection,
            field_name=rb.get(call.body, "fieldName", str),
            properties=rb.key_values(rb.get(call.body, "fieldParams", dict)),
        )
        self.api.call("AlterCollectionField", request, call.db_name)
        return {}


def _field_info(f: schema_pb2.FieldSchema) -> dict[str, Any]:
    """A field as Milvus's REST describe lists it."""
    info: dict[str, Any] = {
        "name": f.name,
        "id": f.fieldID,
        "type": schema_pb2.DataType.Name(f.data_type),
        "primaryKey": f.is_primary_key,
        "partitionKey": f.is_partition_key,
        "clusteringKey": f.is_clustering_key,
        "nullable": f.nullable,
        "autoId": f.autoID,
        "description": f.description,
        "params": [{"key": kv.key, "value": kv.value} for kv in f.type_params],
    }
    if f.HasField("default_value") and f.default_value.WhichOneof("data"):
        info["defaultValue"] = getattr(f.default_value, f.default_value.WhichOneof("data"))
    if f.data_type == schema_pb2.DataType.Array:
        info["elementType"] = schema_pb2.DataType.Name(f.element_type)
    if f.is_function_output:
        info["isFunctionOutput"] = True
    return info


def _function_info(fn: schema_pb2.FunctionSchema) -> dict[str, Any]:
    """A schema function as Milvus's REST describe lists it."""
    return {
        "name": fn.name,
        "id": fn.id,
        "description": fn.description,
        "type": schema_pb2.FunctionType.Name(fn.type),
        "inputFieldNames": list(fn.input_field_names),
        "outputFieldNames": list(fn.output_field_names),
        "params": [{"key": kv.key, "value": kv.value} for kv in fn.params],
    }
