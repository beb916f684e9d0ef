"""The Milvus gRPC service (pymilvus's own servicer base): each RPC unpacks its request,
calls the proxy core and packs the answer; every error becomes a Milvus status.

RPCs not listed here answer with pymilvus's base class (UNIMPLEMENTED), which pymilvus
reports as an error, never as silent success.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

from services import __version__
from services.common import errors, timestamp
from services.common.errors import MilvusError
from services.common.names import DEFAULT_DB, qualified, split
from services.common.schema import ConsistencyLevel
from services.proxy import convert
from services.proxy.core import Proxy
from services.proxy.dql import QuerySpec, SearchSpec
from services.proxy.system_info import (
    DEFAULT_RESOURCE_GROUP,
    DEFAULT_RESOURCE_GROUP_CAPACITY,
    SYSTEM_INFO,
    Member,
    metric_type,
    system_topology,
)

log = logging.getLogger(__name__)

#: the Milvus version whose API this proxy speaks (pymilvus checks features against it)
MILVUS_VERSION = "v2.6.0"


def rpc(response_type: type) -> Callable:
    """Turn exceptions into ``response_type(status=...)`` so clients see Milvus errors."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def handler(self: MilvusService, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return fn(self, request, context)
            except Exception as exc:
                if not isinstance(exc, MilvusError):
                    log.exception("request failed", extra={"rpc": fn.__name__})
                status = convert.error_status(exc)
                if response_type is common_pb2.Status:
                    return status
                return response_type(status=status)

        return handler

    return wrap


def _ok() -> common_pb2.Status:
    return convert.ok_status()


class MilvusService(milvus_pb2_grpc.MilvusServiceServicer):
    def __init__(
        self,
        proxy: Proxy,
        deploy_mode: str = "STANDALONE",
        members: Callable[[], list[Member]] | None = None,
    ) -> None:
        self.proxy = proxy
        self._deploy_mode = deploy_mode
        #: the live processes (their sessions), for GetMetrics' system topology
        self._members = members or (lambda: [Member("proxy", proxy.server_id, "")])

    # -- connection ----------------------------------------------------------------------

    @rpc(milvus_pb2.ConnectResponse)
    def Connect(self, request, context):
        # a client bound to a database learns at once that it is missing, as from Milvus
        self.proxy.describe_database(_db(request, context))
        info = common_pb2.ServerInfo(
            build_tags=f"vectide-{__version__}",
            deploy_mode=self._deploy_mode,
            reserved={"vectide": __version__},
        )
        return milvus_pb2.ConnectResponse(
            status=_ok(), server_info=info, identifier=self.proxy.server_id
        )

    @rpc(milvus_pb2.GetVersionResponse)
    def GetVersion(self, request, context):
        return milvus_pb2.GetVersionResponse(status=_ok(), version=MILVUS_VERSION)

    @rpc(milvus_pb2.CheckHealthResponse)
    def CheckHealth(self, request, context):
        self.proxy.rootcoord.alloc_timestamp()
        return milvus_pb2.CheckHealthResponse(status=_ok(), isHealthy=True)

    # -- databases -----------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateDatabase(self, request, context):
        self.proxy.create_database(request.db_name, convert.kv_pairs(request.properties))
        return _ok()

    @rpc(common_pb2.Status)
    def DropDatabase(self, request, context):
        self.proxy.drop_database(request.db_name)
        return _ok()

    @rpc(common_pb2.Status)
    def AlterDatabase(self, request, context):
        self.proxy.alter_database(
            request.db_name or DEFAULT_DB,
            convert.kv_pairs(request.properties),
            list(request.delete_keys),
        )
        return _ok()

    @rpc(milvus_pb2.ListDatabasesResponse)
    def ListDatabases(self, request, context):
        dbs = self.proxy.list_databases()
        return milvus_pb2.ListDatabasesResponse(
            status=_ok(),
            db_names=[d.name for d in dbs],
            db_ids=[d.db_id for d in dbs],
            created_timestamp=[d.create_ts for d in dbs],
        )

    @rpc(milvus_pb2.DescribeDatabaseResponse)
    def DescribeDatabase(self, request, context):
        db = self.proxy.describe_database(request.db_name or DEFAULT_DB)
        return milvus_pb2.DescribeDatabaseResponse(
            status=_ok(),
            db_name=db.name,
            dbID=db.db_id,
            created_timestamp=db.create_ts,
            properties=[common_pb2.KeyValuePair(key=k, value=v) for k, v in db.properties.items()],
        )

    # -- aliases -------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateAlias(self, request, context):
        self.proxy.create_alias(_ref(request, context), _alias(request, context))
        return _ok()

    @rpc(common_pb2.Status)
    def AlterAlias(self, request, context):
        self.proxy.alter_alias(_ref(request, context), _alias(request, context))
        return _ok()

    @rpc(common_pb2.Status)
    def DropAlias(self, request, context):
        self.proxy.drop_alias(_alias(request, context))
        return _ok()

    @rpc(milvus_pb2.DescribeAliasResponse)
    def DescribeAlias(self, request, context):
        collection = self.proxy.describe_alias(_alias(request, context))
        return milvus_pb2.DescribeAliasResponse(
            status=_ok(), db_name=_db(request, context), alias=request.alias, collection=collection
        )

    @rpc(milvus_pb2.ListAliasesResponse)
    def ListAliases(self, request, context):
        db_name = _db(request, context)
        aliases = self.proxy.list_aliases(db_name, _ref(request, context))
        return milvus_pb2.ListAliasesResponse(
            status=_ok(),
            db_name=db_name,
            collection_name=request.collection_name,
            aliases=aliases,
        )

    @rpc(milvus_pb2.ComponentStates)
    def GetComponentStates(self, request, context):
        """Healthy once serving: Attu and the SDKs' health checks ask before anything else."""
        self.proxy.rootcoord.alloc_timestamp()
        state = milvus_pb2.ComponentInfo(
            nodeID=self.proxy.server_id, role="proxy", state_code=common_pb2.StateCode.Healthy
        )
        return milvus_pb2.ComponentStates(state=state, status=_ok())

    @rpc(milvus_pb2.GetMetricsResponse)
    def GetMetrics(self, request, context):
        kind = metric_type(request.request)
        if kind != SYSTEM_INFO:
            raise errors.invalid(f"unsupported metric type: {kind or '(none)'}")
        topology = system_topology(
            self._members(), self.proxy.server_id, self._deploy_mode, MILVUS_VERSION
        )
        return milvus_pb2.GetMetricsResponse(
            status=_ok(),
            response=json.dumps(topology),
            component_name=f"proxy{self.proxy.server_id}",
        )

    @rpc(milvus_pb2.AllocTimestampResponse)
    def AllocTimestamp(self, request, context):
        return milvus_pb2.AllocTimestampResponse(
            status=_ok(), timestamp=self.proxy.rootcoord.alloc_timestamp()
        )

    # -- collections ---------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateCollection(self, request, context):
        schema = convert.schema_from_proto(request.schema, request.collection_name)
        level = ConsistencyLevel(request.consistency_level)
        self.proxy.create_collection(
            schema,
            request.shards_num,
            level,
            convert.kv_pairs(request.properties),
            bytes(request.schema),
            _db(request, context),
        )
        return _ok()

    @rpc(common_pb2.Status)
    def DropCollection(self, request, context):
        self.proxy.drop_collection(_ref(request, context))
        return _ok()

    @rpc(common_pb2.Status)
    def RenameCollection(self, request, context):
        db_name = _db(request, context)
        old = qualified(db_name, request.oldName)
        self.proxy.rename_collection(old, request.newDBName or db_name, request.newName)
        return _ok()

    @rpc(milvus_pb2.BoolResponse)
    def HasCollection(self, request, context):
        return milvus_pb2.BoolResponse(
            status=_ok(), value=self.proxy.has_collection(_ref(request, context))
        )

    @rpc(milvus_pb2.DescribeCollectionResponse)
    def DescribeCollection(self, request, context):
        info = self.proxy.describe_collection(_ref(request, context), request.collectionID)
        aliases = self.proxy.list_aliases(info.db_name, qualified(info.db_name, info.name))
        return convert.describe_response(info, aliases)

    @rpc(milvus_pb2.ShowCollectionsResponse)
    def ShowCollections(self, request, context):
        in_memory = request.type == milvus_pb2.ShowType.InMemory
        infos = self.proxy.show_collections(_db(request, context), loaded_only=in_memory)
        if request.collection_names:
            infos = [c for c in infos if c.name in set(request.collection_names)]
        return milvus_pb2.ShowCollectionsResponse(
            status=_ok(),
            collection_names=[c.name for c in infos],
            collection_ids=[c.collection_id for c in infos],
            created_timestamps=[c.create_ts for c in infos],
            created_utc_timestamps=[timestamp.physical_ms(c.create_ts) for c in infos],
            inMemory_percentages=[100] * len(infos) if in_memory else [],
            query_service_available=[True] * len(infos) if in_memory else [],
            shards_num=[c.shards_num for c in infos],
        )

    @rpc(milvus_pb2.GetCollectionStatisticsResponse)
    def GetCollectionStatistics(self, request, context):
        count = self.proxy.row_count(_ref(request, context))
        return milvus_pb2.GetCollectionStatisticsResponse(
            status=_ok(), stats=[common_pb2.KeyValuePair(key="row_count", value=str(count))]
        )

    # -- partitions ----------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreatePartition(self, request, context):
        self.proxy.create_partition(_ref(request, context), request.partition_name)
        return _ok()

    @rpc(common_pb2.Status)
    def DropPartition(self, request, context):
        self.proxy.drop_partition(_ref(request, context), request.partition_name)
        return _ok()

    @rpc(milvus_pb2.BoolResponse)
    def HasPartition(self, request, context):
        info = self.proxy.describe_collection(_ref(request, context))
        return milvus_pb2.BoolResponse(
            status=_ok(), value=info.partition(request.partition_name) is not None
        )

    @rpc(milvus_pb2.ShowPartitionsResponse)
    def ShowPartitions(self, request, context):
        parts = self.proxy.show_partitions(_ref(request, context)).partitions
        if request.partition_names:
            parts = [p for p in parts if p.name in set(request.partition_names)]
        return milvus_pb2.ShowPartitionsResponse(
            status=_ok(),
            partition_names=[p.name for p in parts],
            partitionIDs=[p.partition_id for p in parts],
            created_timestamps=[p.create_ts for p in parts],
            created_utc_timestamps=[timestamp.physical_ms(p.create_ts) for p in parts],
        )

    # -- indexes -------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateIndex(self, request, context):
        params: dict[str, Any] = {}
        for kv in request.extra_params:
            if kv.key == "params":
                params.update(json.loads(kv.value or "{}"))
            else:
                params[kv.key] = kv.value
        self.proxy.create_index(
            _ref(request, context), request.field_name, request.index_name, params
        )
        return _ok()

    @rpc(milvus_pb2.DescribeIndexResponse)
    def DescribeIndex(self, request, context):
        indexes = self.proxy.describe_index(
            _ref(request, context), request.index_name, request.field_name
        )
        response = milvus_pb2.DescribeIndexResponse(status=_ok())
        for index in indexes:
            total, indexed, pending = self.proxy.index_progress(_ref(request, context), index)
            response.index_descriptions.add(
                index_name=index.index_name,
                indexID=index.index_id,
                field_name=index.field_name,
                params=[
                    common_pb2.KeyValuePair(key="index_type", value=index.index_type),
                    common_pb2.KeyValuePair(key="metric_type", value=index.metric_type),
                    common_pb2.KeyValuePair(key="params", value=json.dumps(index.params)),
                ],
                # as Milvus: Finished once every persisted segment is indexed; growing rows
                # count in total_rows only
                state=common_pb2.InProgress if pending else common_pb2.Finished,
                indexed_rows=indexed,
                total_rows=total,
                pending_index_rows=pending,
            )
        return response

    def _progress(self, request: Any, context: grpc.ServicerContext) -> tuple[int, int, int]:
        """(total, indexed, pending) rows summed over the indexes the request names."""
        ref = _ref(request, context)
        indexes = self.proxy.describe_index(ref, request.index_name, request.field_name)
        rows = [self.proxy.index_progress(ref, index) for index in indexes]
        total, indexed, pending = (sum(column) for column in zip(*rows, strict=True))
        return total, indexed, pending

    @rpc(milvus_pb2.GetIndexStateResponse)
    def GetIndexState(self, request, context):
        """The older SDKs' (and Attu's) index poll: Finished as DescribeIndex's state."""
        _, _, pending = self._progress(request, context)
        state = common_pb2.InProgress if pending else common_pb2.Finished
        return milvus_pb2.GetIndexStateResponse(status=_ok(), state=state)

    @rpc(milvus_pb2.GetIndexBuildProgressResponse)
    def GetIndexBuildProgress(self, request, context):
        total, indexed, _ = self._progress(request, context)
        return milvus_pb2.GetIndexBuildProgressResponse(
            status=_ok(), indexed_rows=indexed, total_rows=total
        )

    @rpc(common_pb2.Status)
    def DropIndex(self, request, context):
        name = request.index_name
        if not name and request.field_name:
            info = self.proxy.describe_collection(_ref(request, context))
            index = info.index_on(request.field_name)
            name = index.index_name if index else request.field_name
        self.proxy.drop_index(_ref(request, context), name)
        return _ok()

    # -- load ----------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def LoadCollection(self, request, context):
        self.proxy.load_collection(_ref(request, context))
        return _ok()

    @rpc(common_pb2.Status)
    def ReleaseCollection(self, request, context):
        self.proxy.release_collection(_ref(request, context))
        return _ok()

    @rpc(common_pb2.Status)
    def LoadPartitions(self, request, context):
        self.proxy.load_partitions(_ref(request, context), list(request.partition_names))
        return _ok()

    @rpc(common_pb2.Status)
    def ReleasePartitions(self, request, context):
        self.proxy.release_partitions(_ref(request, context), list(request.partition_names))
        return _ok()

    @rpc(milvus_pb2.GetLoadingProgressResponse)
    def GetLoadingProgress(self, request, context):
        names = list(request.partition_names)
        _, progress = self.proxy.load_state(_ref(request, context), names)
        return milvus_pb2.GetLoadingProgressResponse(
            status=_ok(), progress=progress, refresh_progress=progress
        )

    @rpc(milvus_pb2.GetLoadStateResponse)
    def GetLoadState(self, request, context):
        names = list(request.partition_names)
        state, _ = self.proxy.load_state(_ref(request, context), names)
        return milvus_pb2.GetLoadStateResponse(status=_ok(), state=state)

    @rpc(milvus_pb2.ListResourceGroupsResponse)
    def ListResourceGroups(self, request, context):
        return milvus_pb2.ListResourceGroupsResponse(
            status=_ok(), resource_groups=[DEFAULT_RESOURCE_GROUP]
        )

    @rpc(milvus_pb2.DescribeResourceGroupResponse)
    def DescribeResourceGroup(self, request, context):
        """The default group: every live query node, one replica per loaded collection of
        the request's database (Attu's load dialog and its node view read this)."""
        if request.resource_group != DEFAULT_RESOURCE_GROUP:
            raise MilvusError(
                errors.Code.RESOURCE_GROUP_NOT_FOUND,
                f"resource group not found[rg={request.resource_group}]",
            )
        nodes = [m for m in self._members() if m.role == "querynode"]
        loaded = self.proxy.show_collections(_db(request, context), loaded_only=True)
        group = milvus_pb2.ResourceGroup(
            name=DEFAULT_RESOURCE_GROUP,
            capacity=DEFAULT_RESOURCE_GROUP_CAPACITY,
            num_available_node=len(nodes),
            num_loaded_replica={c.name: 1 for c in loaded},
            nodes=[common_pb2.NodeInfo(node_id=m.node_id, address=m.address) for m in nodes],
        )
        return milvus_pb2.DescribeResourceGroupResponse(status=_ok(), resource_group=group)

    @rpc(milvus_pb2.GetReplicasResponse)
    def GetReplicas(self, request, context):
        """One replica per loaded collection (Milvus's default replica number), naming the
        query node that serves each shard; an unloaded collection has none."""
        info = self.proxy.describe_collection(_ref(request, context), request.collectionID)
        leaders = self.proxy.replica_shards(info)
        if not leaders:
            return milvus_pb2.GetReplicasResponse(status=_ok())
        shards = [
            milvus_pb2.ShardReplica(
                leaderID=node,
                dm_channel_name=vchannel,
                node_ids=[node] if request.with_shard_nodes else [],
            )
            for vchannel, node in sorted(leaders.items())
        ]
        replica = milvus_pb2.ReplicaInfo(
            replicaID=info.collection_id,
            collectionID=info.collection_id,
            partition_ids=[p.partition_id for p in info.partitions],
            shard_replicas=shards,
            node_ids=sorted(set(leaders.values())),
            resource_group_name=DEFAULT_RESOURCE_GROUP,
        )
        return milvus_pb2.GetReplicasResponse(status=_ok(), replicas=[replica])

    # -- writes --------------------------------------------------------------------------

    def _columns(self, request: Any, context: grpc.ServicerContext) -> tuple[str, dict, int]:
        info = self.proxy.meta.get(_ref(request, context))
        columns = convert.columns_from_fields_data(
            info.schema, request.fields_data, request.num_rows
        )
        return _ref(request, context), columns, request.num_rows

    @rpc(milvus_pb2.MutationResult)
    def Insert(self, request, context):
        name, columns, num_rows = self._columns(request, context)
        result = self.proxy.insert(name, request.partition_name, columns, num_rows)
        return self._mutation(result)

    @rpc(milvus_pb2.MutationResult)
    def Upsert(self, request, context):
        name, columns, num_rows = self._columns(request, context)
        result = self.proxy.upsert(name, request.partition_name, columns, num_rows)
        return self._mutation(result)

    @rpc(milvus_pb2.MutationResult)
    def Delete(self, request, context):
        result = self.proxy.delete(
            _ref(request, context),
            request.partition_name,
            request.expr,
            template_values(request.expr_template_values),
        )
        return self._mutation(result)

    @staticmethod
    def _mutation(result: Any) -> milvus_pb2.MutationResult:
        if result.delete_count:  # Milvus >= 2.3.2 returns no keys for deletes
            return milvus_pb2.MutationResult(
                status=_ok(), delete_cnt=result.delete_count, timestamp=result.ts
            )
        return milvus_pb2.MutationResult(
            status=_ok(),
            IDs=convert.ids_proto(result.pks),
            succ_index=list(range(len(result.pks))),
            insert_cnt=result.insert_count,
            delete_cnt=result.delete_count,
            upsert_cnt=result.upsert_count,
            timestamp=result.ts,
        )

    # -- reads ---------------------------------------------------------------------------

    @rpc(milvus_pb2.SearchResults)
    def Search(self, request, context):
        if request.sub_reqs or request.search_by_primary_keys:
            raise MilvusError(
                errors.Code.UNIMPLEMENTED,
                "hybrid search and search by primary keys are not supported yet",
            )
        params = {kv.key: kv.value for kv in request.search_params}
        info = self.proxy.meta.get(_ref(request, context))
        anns_field = _loads(params.get("anns_field", '""')) or ""
        field = info.schema.field(anns_field) if anns_field else None
        if field is None:
            vectors = info.schema.vector_fields
            field = vectors[0] if len(vectors) == 1 else None
        if field is None:
            raise errors.invalid("anns_field is required")
        spec = SearchSpec(
            vectors=convert.read_vectors(request.placeholder_group, field.dim),
            anns_field=field.name,
            metric_type=str(_loads(params.get("metric_type", '""')) or ""),
            limit=int(_loads(params.get("topk", "10"))),
            offset=int(_loads(params.get("offset", "0")) or 0),
            round_decimal=int(_loads(params.get("round_decimal", "-1"))),
            params=_params(params.get("params")),
            **self._read_common(request, request.dsl, context),
        )
        info, hits, outputs = self.proxy.search(spec)
        return convert.search_results(info, hits, outputs, spec.limit)

    @rpc(milvus_pb2.QueryResults)
    def Query(self, request, context):
        params = {kv.key: kv.value for kv in request.query_params}
        limit = params.get("limit")
        spec = QuerySpec(
            limit=int(limit) if limit not in (None, "") else None,
            offset=int(params.get("offset") or 0),
            **self._read_common(request, request.expr, context),
        )
        info, rows, outputs = self.proxy.query(spec)
        return convert.query_results(info, rows, outputs)

    def _read_common(self, request: Any, expr: str, context: grpc.ServicerContext) -> dict:
        return {
            "collection_name": _ref(request, context),
            "expr": expr,
            "expr_params": template_values(request.expr_template_values),
            "partition_names": list(request.partition_names),
            "output_fields": list(request.output_fields),
            "guarantee_ts": request.guarantee_timestamp,
            "use_default_consistency": request.use_default_consistency,
            "consistency_level": ConsistencyLevel(request.consistency_level),
            "deadline_s": context.time_remaining() if context is not None else None,
        }

    # -- flush ---------------------------------------------------------------------------

    @rpc(milvus_pb2.FlushResponse)
    def Flush(self, request, context):
        db_name = _db(request, context)
        flushed = self.proxy.flush([qualified(db_name, n) for n in request.collection_names])
        response = milvus_pb2.FlushResponse(status=_ok(), db_name=db_name)
        for ref, (segments, ts) in flushed.items():
            name = split(ref)[1]
            response.coll_segIDs[name].CopyFrom(schema_pb2.LongArray(data=segments))
            response.flush_coll_segIDs[name].CopyFrom(schema_pb2.LongArray())
            response.coll_seal_times[name] = timestamp.physical_ms(ts) // 1000
            response.coll_flush_ts[name] = ts
        return response

    @rpc(milvus_pb2.GetFlushStateResponse)
    def GetFlushState(self, request, context):
        return milvus_pb2.GetFlushStateResponse(
            status=_ok(), flushed=self.proxy.flushed(list(request.segmentIDs))
        )

    @rpc(milvus_pb2.GetPersistentSegmentInfoResponse)
    def GetPersistentSegmentInfo(self, request, context):
        """Rows on S3 per segment, for every state: a client watches persistence with it."""
        collection_id, segments = self.proxy.persistent_segments(request.collectionName)
        return milvus_pb2.GetPersistentSegmentInfoResponse(
            status=_ok(),
            infos=[
                milvus_pb2.PersistentSegmentInfo(
                    segmentID=s.segment_id,
                    collectionID=collection_id,
                    partitionID=s.partition_id,
                    num_rows=s.num_rows,
                    state=_segment_state(s.state),
                )
                for s in segments
            ],
        )

    @rpc(milvus_pb2.GetQuerySegmentInfoResponse)
    def GetQuerySegmentInfo(self, request, context):
        collection_id, served = self.proxy.query_segments(request.collectionName)
        return milvus_pb2.GetQuerySegmentInfoResponse(
            status=_ok(),
            infos=[
                milvus_pb2.QuerySegmentInfo(
                    segmentID=s.segment_id,
                    collectionID=collection_id,
                    partitionID=s.partition_id,
                    num_rows=s.assigned_rows if s.state == "Growing" else s.num_rows,
                    nodeID=node_id,
                    nodeIds=[node_id],
                    state=_segment_state(s.state),
                )
                for s, node_id in served
            ],
        )


def _db(request: Any, context: grpc.ServicerContext | None) -> str:
    """The request's database: its ``db_name``, else the ``dbname`` header pymilvus sends with
    every call (Milvus's proxy reads it the same way, in its database interceptor), else
    ``default``."""
    name = getattr(request, "db_name", "")
    if not name and context is not None:
        name = dict(context.invocation_metadata() or ()).get("dbname", "")
    return name or DEFAULT_DB


def _ref(request: Any, context: grpc.ServicerContext | None) -> str:
    """The request's collection (or alias), qualified by its database ("" when unnamed)."""
    name = request.collection_name
    return qualified(_db(request, context), name) if name else ""


def _alias(request: Any, context: grpc.ServicerContext | None) -> str:
    """The request's alias, qualified by its database."""
    return qualified(_db(request, context), request.alias)


def _segment_state(state: str) -> int:
    """Datacoord's state as Milvus's enum (Indexed is Flushed with an index to Milvus)."""
    return common_pb2.SegmentState.Value("Flushed" if state == "Indexed" else state)


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _params(text: str | None) -> dict[str, Any]:
    value = _loads(text)
    return value if isinstance(value, dict) else {}


def template_values(values: Any) -> dict[str, Any]:
    """pymilvus's expression template values (``expr_params``) as Python values."""
    return {name: _template_value(v) for name, v in values.items()}


def _template_value(v: schema_pb2.TemplateValue) -> Any:
    kind = v.WhichOneof("val")
    if kind == "array_val":
        return _template_array(v.array_val)
    return getattr(v, kind) if kind else None


def _template_array(a: schema_pb2.TemplateArrayValue) -> list[Any]:
    kind = a.WhichOneof("data")
    if kind is None:
        return []
    data = getattr(a, kind).data
    if kind == "array_data":
        return [_template_array(x) for x in data]
    if kind == "json_data":
        return [json.loads(x) for x in data]
    return list(np.asarray(data).tolist()) if kind != "string_data" else list(data)
