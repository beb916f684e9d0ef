"""RESTful v2 ``/entities/*``: insert, upsert, delete, query, get, search and hybrid_search,
each built into the request pymilvus would send and answered by the same MilvusService
method."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.proxy import rest_body as rb
from vectide.services.proxy import rest_rows
from vectide.services.proxy.rest_rows import DT

if TYPE_CHECKING:
    from vectide.services.proxy.rest_call import Handler, RestCall, RestCaller

#: Milvus's REST defaults: query and search return at most 100 rows unless told
DEFAULT_LIMIT = 100
_VECTOR_TYPES = {
    DT.FloatVector,
    DT.BinaryVector,
    DT.Float16Vector,
    DT.BFloat16Vector,
    DT.Int8Vector,
    DT.SparseFloatVector,
}


class EntityHandlers:
    def __init__(self, api: RestCaller) -> None:
        self.api = api

    def routes(self) -> dict[str, Handler]:
        return {
            "insert": lambda c: self._write(c, upsert=False),
            "upsert": lambda c: self._write(c, upsert=True),
            "delete": self.delete,
            "query": self.query,
            "get": self.get,
            "search": self.search,
            "hybrid_search": self.hybrid_search,
            # the URI Milvus's REST server still answers for hybrid search (backward compatible)
            "advanced_search": self.hybrid_search,
        }

    def _write(self, call: RestCall, upsert: bool) -> dict[str, Any]:
        schema = self.api.schema(call)
        data = call.body.get("data")
        if data is None:
            raise rb.missing("data is required")
        fields = rest_rows.columns(data, schema, upsert=upsert)
        proto = milvus_pb2.UpsertRequest if upsert else milvus_pb2.InsertRequest
        request = proto(
            collection_name=call.collection,
            partition_name=rb.get(call.body, "partitionName", str, ""),
            fields_data=fields,
            num_rows=len(data),
        )
        result = self.api.call("Upsert" if upsert else "Insert", request, call.db_name)
        ids = rest_rows.rows([], [], result.IDs, None, call.int64_as_number)
        kind = "upsert" if upsert else "insert"
        count = result.upsert_cnt if upsert else result.insert_cnt
        return {
            "code": 0,
            "data": {f"{kind}Count": count, f"{kind}Ids": [row["id"] for row in ids]},
            "cost": 0,
        }

    def delete(self, call: RestCall) -> dict[str, Any]:
        """By ``filter``, or by ``id`` (one key or a list) when there is no filter."""
        expr = rb.get(call.body, "filter", str, "")
        if not expr:
            expr = rb.pk_filter(call.body, self.api.schema(call))
        request = milvus_pb2.DeleteRequest(
            collection_name=call.collection,
            partition_name=rb.get(call.body, "partitionName", str, ""),
            expr=expr,
            expr_template_values=rb.template_values(call.body),
        )
        result = self.api.call("Delete", request, call.db_name)
        return {"deleteCount": result.delete_cnt}

    def query(self, call: RestCall) -> dict[str, Any]:
        body = call.body
        outputs = rb.name_list(body, "outputFields", ["*"])
        params = {"offset": rb.get(body, "offset", int, 0)}
        if [o.strip().lower() for o in outputs] != ["count(*)"]:
            params["limit"] = rb.get(body, "limit", int, DEFAULT_LIMIT)
        return self._query(call, rb.get(body, "filter", str, ""), outputs, params)

    def get(self, call: RestCall) -> dict[str, Any]:
        expr = rb.pk_filter(call.body, self.api.schema(call))
        outputs = rb.name_list(call.body, "outputFields", ["*"])
        return self._query(call, expr, outputs, {})

    def _query(
        self, call: RestCall, expr: str, outputs: list[str], params: dict[str, int]
    ) -> dict[str, Any]:
        level, use_default = rb.consistency(call.body)
        request = milvus_pb2.QueryRequest(
            collection_name=call.collection,
            expr=expr,
            output_fields=outputs,
            partition_names=rb.name_list(call.body, "partitionNames", []),
            query_params=[
                common_pb2.KeyValuePair(key=k, value=str(v)) for k, v in params.items() if v
            ],
            consistency_level=level,
            use_default_consistency=use_default,
            expr_template_values=rb.template_values(call.body),
        )
        result = self.api.call("Query", request, call.db_name, call.deadline)
        data = rest_rows.rows(
            result.fields_data, list(result.output_fields), None, None, call.int64_as_number
        )
        return {"code": 0, "data": data, "cost": 0}

    def search(self, call: RestCall) -> dict[str, Any]:
        body = call.body
        schema = self.api.schema(call)
        field = _anns_field(schema, rb.get(body, "annsField", str, ""))
        data = body.get("data")
        if data is None:
            raise rb.missing("data is required")
        level, use_default = rb.consistency(body)
        request = milvus_pb2.SearchRequest(
            collection_name=call.collection,
            dsl=rb.get(body, "filter", str, ""),
            dsl_type=common_pb2.DslType.BoolExprV1,
            output_fields=rb.name_list(body, "outputFields", []),
            partition_names=rb.name_list(body, "partitionNames", []),
            placeholder_group=rest_rows.placeholder_group(data, field),
            search_params=_search_params(body, field.name),
            nq=len(data),
            consistency_level=level,
            use_default_consistency=use_default,
            expr_template_values=rb.template_values(body),
        )
        return _hits(call, self.api.call("Search", request, call.db_name, call.deadline))

    def hybrid_search(self, call: RestCall) -> dict[str, Any]:
        """``search``: one search per entry (``data``, ``annsField``, ``filter``, ``limit``,
        ``params``/``metricType`` or ``searchParams``), fused by ``rerank`` (``strategy``
        rrf or weighted, its ``params``); ``limit``, ``offset``, ``outputFields``,
        ``groupingField``/``groupSize``/``strictGroupSize`` apply to the fused list."""
        body = call.body
        schema = self.api.schema(call)
        subs = rb.get(body, "search", list)
        if not all(isinstance(sub, dict) for sub in subs):
            raise rb.bad_format("search must be a list of objects")
        rerank = rb.get(body, "rerank", dict, {})
        level, use_default = rb.consistency(body)
        request = milvus_pb2.HybridSearchRequest(
            collection_name=call.collection,
            partition_names=rb.name_list(body, "partitionNames", []),
            requests=[self._sub_search(call, schema, sub) for sub in subs],
            rank_params=_rank_params(body, rerank),
            output_fields=rb.name_list(body, "outputFields", []),
            consistency_level=level,
            use_default_consistency=use_default,
        )
        return _hits(call, self.api.call("HybridSearch", request, call.db_name, call.deadline))

    @staticmethod
    def _sub_search(
        call: RestCall, schema: schema_pb2.CollectionSchema, sub: dict[str, Any]
    ) -> milvus_pb2.SearchRequest:
        field = _anns_field(schema, rb.get(sub, "annsField", str, ""))
        data = sub.get("data")
        if data is None:
            raise rb.missing("data is required")
        if "searchParams" not in sub:  # Milvus's hybrid entries carry them flat
            sub = {
                **sub,
                "searchParams": {
                    "params": rb.get(sub, "params", dict, {}),
                    "metricType": rb.get(sub, "metricType", str, ""),
                },
            }
        return milvus_pb2.SearchRequest(
            collection_name=call.collection,
            dsl=rb.get(sub, "filter", str, ""),
            dsl_type=common_pb2.DslType.BoolExprV1,
            placeholder_group=rest_rows.placeholder_group(data, field),
            search_params=_search_params(sub, field.name),
            nq=len(data),
            expr_template_values=rb.template_values(sub),
        )


def _hits(call: RestCall, reply: milvus_pb2.SearchResults) -> dict[str, Any]:
    """A search reply's hits as rows, each with its ``distance``."""
    results = reply.results
    if not results.top_k or not results.scores:
        return {"code": 0, "data": [], "cost": 0}
    rows = rest_rows.rows(
        results.fields_data,
        list(results.output_fields),
        results.ids,
        rest_rows.distances(results.scores),
        call.int64_as_number,
    )
    return {"code": 0, "data": rows, "cost": 0}


def _rank_params(body: dict[str, Any], rerank: dict[str, Any]) -> list[common_pb2.KeyValuePair]:
    """The rank_params pymilvus sends for a ranker, ``limit`` and ``offset``, and grouping."""
    pairs: dict[str, Any] = {
        "strategy": rb.get(rerank, "strategy", str, "rrf"),
        "params": rb.get(rerank, "params", dict, {}),
        "limit": rb.get(body, "limit", int, DEFAULT_LIMIT),
        "offset": rb.get(body, "offset", int, 0),
        "round_decimal": -1,
    }
    group_by = rb.get(body, "groupingField", str, "")
    if group_by:
        pairs["group_by_field"] = group_by
        pairs["group_size"] = rb.get(body, "groupSize", int, 1)
        pairs["strict_group_size"] = rb.get(body, "strictGroupSize", bool, False)
    return [common_pb2.KeyValuePair(key=k, value=json.dumps(v)) for k, v in pairs.items()]


def _anns_field(schema: schema_pb2.CollectionSchema, name: str) -> schema_pb2.FieldSchema:
    """The vector field searched: ``annsField``, or the only vector field there is."""
    vectors = [f for f in schema.fields if f.data_type in _VECTOR_TYPES]
    if name:
        found = next((f for f in vectors if f.name == name), None)
        if found is None:
            raise rb.bad_format(f"cannot find a vector field named: {name}")
        return found
    if len(vectors) != 1:
        raise rb.bad_format(
            "search without annsField, but found several vector fields: "
            + ", ".join(f.name for f in vectors)
        )
    return vectors[0]


def _search_params(body: dict[str, Any], anns_field: str) -> list[common_pb2.KeyValuePair]:
    """The search_params pymilvus sends: topk, offset, anns_field, metric_type, the index
    ``params`` as JSON, grouping; ``searchParams`` may also carry ``metricType``."""
    search = rb.get(body, "searchParams", dict, {})
    limit = rb.get(body, "limit", int, DEFAULT_LIMIT)
    if limit <= 0:
        raise MilvusError(Code.PARAMETER_INVALID, f"limit must be positive, got {limit}")
    params = search.get("params", {})
    if not isinstance(params, dict):
        raise rb.bad_format("searchParams.params must be an object")
    pairs = {
        "topk": str(limit),
        "offset": str(rb.get(body, "offset", int, 0)),
        "anns_field": anns_field,
        "params": json.dumps(params),
        "round_decimal": "-1",
    }
    metric = search.get("metricType") or search.get("metric_type")
    if metric:
        pairs["metric_type"] = str(metric)
    group_by = rb.get(body, "groupingField", str, "")
    if group_by:
        pairs["group_by_field"] = group_by
        size = rb.get(body, "groupSize", int, 0)
        if size > 0:
            pairs["group_size"] = str(size)
            pairs["strict_group_size"] = json.dumps(rb.get(body, "strictGroupSize", bool, False))
    return [common_pb2.KeyValuePair(key=k, value=v) for k, v in pairs.items()]
