"""The Milvus gRPC service (pymilvus's own servicer base): each RPC unpacks its request,
calls the proxy core and packs the answer; every error becomes a Milvus status.

Search and HybridSearch live in grpc_search.py, databases, aliases and the cluster RPCs in
grpc_admin.py, users, roles and grants in grpc_rbac.py, compaction in grpc_compaction.py,
bulk import in grpc_import.py (mixins). RPCs listed in none answer with
pymilvus's base class (UNIMPLEMENTED), which pymilvus reports as an error, never as silent
success.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

from vectide.services import __version__
from vectide.services.common import errors, timestamp, timestamptz
from vectide.services.common.aggregation import GROUP_BY_PARAM
from vectide.services.common.collection_properties import checked_zone, inherited
from vectide.services.common.config import QuotaConfig
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.names import qualified, split
from vectide.services.common.order_by import ORDER_BY_PARAM
from vectide.services.common.schema import IndexInfo
from vectide.services.common.security.rbac import Rbac
from vectide.services.proxy import convert, functions, limits, time_zones
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.dql import QuerySpec
from vectide.services.proxy.expr_params import template_values
from vectide.services.proxy.grpc_admin import AdminRpcs
from vectide.services.proxy.grpc_auth import CURRENT_USER
from vectide.services.proxy.grpc_common import MILVUS_VERSION, db_of, ok, ref_of, rpc
from vectide.services.proxy.grpc_compaction import CompactionRpcs
from vectide.services.proxy.grpc_import import ImportRpcs
from vectide.services.proxy.grpc_rbac import RbacRpcs
from vectide.services.proxy.grpc_search import SearchRpcs
from vectide.services.proxy.limits import RateLimiter
from vectide.services.proxy.system_info import Member


class MilvusService(
    SearchRpcs,
    AdminRpcs,
    RbacRpcs,
    CompactionRpcs,
    ImportRpcs,
    milvus_pb2_grpc.MilvusServiceServicer,
):
    def __init__(
        self,
        proxy: Proxy,
        deploy_mode: str = "STANDALONE",
        members: Callable[[], list[Member]] | None = None,
        rbac: Rbac | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.proxy = proxy
        self.rbac = rbac
        #: per-user rates of DML, search and query (``quota.*``; unmetered by default)
        self._limiter = limiter or RateLimiter(QuotaConfig())
        self._deploy_mode = deploy_mode
        #: the live processes (their sessions), for GetMetrics' system topology
        self._members = members or (lambda: [Member("proxy", proxy.server_id, "")])

    # -- connection ----------------------------------------------------------------------

    @rpc(milvus_pb2.ConnectResponse)
    def Connect(self, request, context):
        # a client bound to a database learns at once that it is missing, as from Milvus
        self.proxy.describe_database(db_of(request, context))
        info = common_pb2.ServerInfo(
            build_tags=f"vectide-{__version__}",
            deploy_mode=self._deploy_mode,
            reserved={"vectide": __version__},
        )
        return milvus_pb2.ConnectResponse(
            status=ok(), server_info=info, identifier=self.proxy.server_id
        )

    @rpc(milvus_pb2.GetVersionResponse)
    def GetVersion(self, request, context):
        return milvus_pb2.GetVersionResponse(status=ok(), version=MILVUS_VERSION)

    @rpc(milvus_pb2.CheckHealthResponse)
    def CheckHealth(self, request, context):
        self.proxy.rootcoord.alloc_timestamp()
        return milvus_pb2.CheckHealthResponse(status=ok(), isHealthy=True)

    @rpc(milvus_pb2.AllocTimestampResponse)
    def AllocTimestamp(self, request, context):
        return milvus_pb2.AllocTimestampResponse(
            status=ok(), timestamp=self.proxy.rootcoord.alloc_timestamp()
        )

    # -- collections ---------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateCollection(self, request, context):
        properties = convert.kv_pairs(request.properties)
        db_name = db_of(request, context)
        # naive TIMESTAMPTZ defaults are read in the zone the collection will have: its own,
        # or the one it inherits from its database (the rootcoord adds that property)
        database = self.proxy.describe_database(db_name).properties
        zone = checked_zone(timestamptz.zone_of(inherited(database, properties)))
        schema = convert.schema_from_proto(request.schema, request.collection_name, zone)
        level = convert.consistency_level(request.consistency_level)
        self.proxy.create_collection(
            schema, request.shards_num, level, properties, bytes(request.schema), db_name
        )
        return ok()

    @rpc(common_pb2.Status)
    def DropCollection(self, request, context):
        self.proxy.drop_collection(ref_of(request, context))
        return ok()

    @rpc(common_pb2.Status)
    def RenameCollection(self, request, context):
        db_name = db_of(request, context)
        old = qualified(db_name, request.oldName)
        self.proxy.rename_collection(old, request.newDBName or db_name, request.newName)
        return ok()

    @rpc(common_pb2.Status)
    def AlterCollection(self, request, context):
        """Properties set or deleted (pymilvus ``alter_collection_properties`` and
        ``drop_collection_properties``)."""
        self.proxy.alter_collection(
            ref_of(request, context),
            convert.kv_pairs(request.properties),
            list(request.delete_keys),
        )
        return ok()

    @rpc(common_pb2.Status)
    def AddCollectionField(self, request, context):
        """A nullable field added to an existing collection (pymilvus ``add_collection_field``):
        rows written before read as its default value, or null."""
        ref = ref_of(request, context)
        info = self.proxy.describe_collection(ref)
        zone = time_zones.collection_zone(info)
        self.proxy.add_collection_field(ref, convert.added_field(request.schema, info.schema, zone))
        return ok()

    @rpc(common_pb2.Status)
    def AlterCollectionField(self, request, context):
        """A field's ``max_length``, ``max_capacity`` or ``mmap.enabled`` (pymilvus
        ``alter_collection_field``)."""
        self.proxy.alter_collection_field(
            ref_of(request, context),
            request.field_name,
            convert.kv_pairs(request.properties),
            list(request.delete_keys),
        )
        return ok()

    @rpc(common_pb2.Status)
    def AddCollectionFunction(self, request, context):
        """Refused with the reason (``functions.refuse_change``)."""
        self.proxy.describe_collection(ref_of(request, context))
        raise functions.refuse_change(request.functionSchema, "adding")

    @rpc(common_pb2.Status)
    def AlterCollectionFunction(self, request, context):
        """Checked as Milvus checks it (names, existence), then refused with the reason."""
        info = self.proxy.describe_collection(ref_of(request, context))
        if request.function_name != request.functionSchema.name:
            raise errors.invalid("invalid function config: the function names differ")
        if not any(f.name == request.function_name for f in info.schema.functions):
            raise errors.invalid(f"function {request.function_name} not found")
        raise functions.refuse_change(request.functionSchema, "altering")

    @rpc(common_pb2.Status)
    def DropCollectionFunction(self, request, context):
        """A function that is not there is dropped already (Milvus's answer too); the ones
        a collection has here are BM25 functions, which Milvus does not drop either."""
        info = self.proxy.describe_collection(ref_of(request, context))
        if any(f.name == request.function_name for f in info.schema.functions):
            raise errors.invalid(
                f"dropping BM25 function {request.function_name} is not supported (as in "
                "Milvus): its output field holds the rows' sparse vectors"
            )
        return ok()

    @rpc(milvus_pb2.TruncateCollectionResponse)
    def TruncateCollection(self, request, context):
        """Remove every row, keep the collection (pymilvus ``truncate_collection``)."""
        self.proxy.truncate_collection(ref_of(request, context))
        return milvus_pb2.TruncateCollectionResponse(status=ok())

    @rpc(milvus_pb2.BoolResponse)
    def HasCollection(self, request, context):
        return milvus_pb2.BoolResponse(
            status=ok(), value=self.proxy.has_collection(ref_of(request, context))
        )

    @rpc(milvus_pb2.DescribeCollectionResponse)
    def DescribeCollection(self, request, context):
        info = self.proxy.describe_collection(ref_of(request, context), request.collectionID)
        aliases = self.proxy.list_aliases(info.db_name, qualified(info.db_name, info.name))
        return convert.describe_response(info, aliases)

    @rpc(milvus_pb2.BatchDescribeCollectionResponse)
    def BatchDescribeCollection(self, request, context):
        """The Node SDK's ``batchDescribeCollections``: one DescribeCollection answer per
        name, in order; a name that fails carries its own error status and the call succeeds
        (as Milvus). A failed answer also carries an empty schema of that name: the Node SDK
        (3.0.6) formats every answer's schema and throws on a missing one."""
        if not request.collection_name:
            raise MilvusError(Code.PARAMETER_MISSING, "collection names cannot be empty")
        db_name = db_of(request, context)
        answers = [
            self.DescribeCollection(
                milvus_pb2.DescribeCollectionRequest(db_name=db_name, collection_name=name),
                context,
            )
            for name in request.collection_name
        ]
        for name, answer in zip(request.collection_name, answers, strict=True):
            if answer.status.code:
                answer.collection_name = name
                answer.schema.name = name
        return milvus_pb2.BatchDescribeCollectionResponse(status=ok(), responses=answers)

    @rpc(milvus_pb2.ShowCollectionsResponse)
    def ShowCollections(self, request, context):
        in_memory = request.type == milvus_pb2.ShowType.InMemory
        infos = self.proxy.show_collections(db_of(request, context), loaded_only=in_memory)
        if request.collection_names:
            infos = [c for c in infos if c.name in set(request.collection_names)]
        return milvus_pb2.ShowCollectionsResponse(
            status=ok(),
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
        count = self.proxy.row_count(ref_of(request, context))
        return milvus_pb2.GetCollectionStatisticsResponse(
            status=ok(), stats=[common_pb2.KeyValuePair(key="row_count", value=str(count))]
        )

    @rpc(milvus_pb2.GetPartitionStatisticsResponse)
    def GetPartitionStatistics(self, request, context):
        count = self.proxy.row_count(ref_of(request, context), request.partition_name)
        return milvus_pb2.GetPartitionStatisticsResponse(
            status=ok(), stats=[common_pb2.KeyValuePair(key="row_count", value=str(count))]
        )

    # -- partitions ----------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreatePartition(self, request, context):
        self.proxy.create_partition(ref_of(request, context), request.partition_name)
        return ok()

    @rpc(common_pb2.Status)
    def DropPartition(self, request, context):
        self.proxy.drop_partition(ref_of(request, context), request.partition_name)
        return ok()

    @rpc(milvus_pb2.BoolResponse)
    def HasPartition(self, request, context):
        info = self.proxy.describe_collection(ref_of(request, context))
        return milvus_pb2.BoolResponse(
            status=ok(), value=info.partition(request.partition_name) is not None
        )

    @rpc(milvus_pb2.ShowPartitionsResponse)
    def ShowPartitions(self, request, context):
        parts = self.proxy.show_partitions(ref_of(request, context)).partitions
        if request.partition_names:
            parts = [p for p in parts if p.name in set(request.partition_names)]
        return milvus_pb2.ShowPartitionsResponse(
            status=ok(),
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
                extra = convert.json_param(kv.value or "{}", "index params")
                if not isinstance(extra, dict):
                    raise errors.invalid(f"index params must be a JSON object, got {kv.value!r}")
                params.update(extra)
            else:
                params[kv.key] = kv.value
        self.proxy.create_index(
            ref_of(request, context), request.field_name, request.index_name, params
        )
        return ok()

    @rpc(milvus_pb2.DescribeIndexResponse)
    def DescribeIndex(self, request, context):
        response = milvus_pb2.DescribeIndexResponse(status=ok())
        self._describe_indexes(request, context, response.index_descriptions)
        return response

    @rpc(milvus_pb2.GetIndexStatisticsResponse)
    def GetIndexStatistics(self, request, context):
        """The Node SDK's ``getIndexStatistics``: DescribeIndex's answer (Milvus counts every
        segment here, DescribeIndex those older than the index; Vectide always counts every
        one)."""
        response = milvus_pb2.GetIndexStatisticsResponse(status=ok())
        self._describe_indexes(request, context, response.index_descriptions)
        return response

    def _describe_indexes(self, request: Any, context: grpc.ServicerContext, out: Any) -> None:
        """The indexes ``request`` names (all without a name), with their row counts."""
        ref = ref_of(request, context)
        field_name = getattr(request, "field_name", "")  # GetIndexStatistics names none
        for index in self.proxy.describe_index(ref, request.index_name, field_name):
            total, indexed, pending = self.proxy.index_progress(ref, index)
            out.add(
                index_name=index.index_name,
                indexID=index.index_id,
                field_name=index.field_name,
                params=_index_params(index),
                # as Milvus: Finished once every persisted segment is indexed; growing rows
                # count in total_rows only
                state=common_pb2.InProgress if pending else common_pb2.Finished,
                indexed_rows=indexed,
                total_rows=total,
                pending_index_rows=pending,
            )

    def _progress(self, request: Any, context: grpc.ServicerContext) -> tuple[int, int, int]:
        """(total, indexed, pending) rows summed over the indexes the request names."""
        ref = ref_of(request, context)
        indexes = self.proxy.describe_index(ref, request.index_name, request.field_name)
        rows = [self.proxy.index_progress(ref, index) for index in indexes]
        total, indexed, pending = (sum(column) for column in zip(*rows, strict=True))
        return total, indexed, pending

    @rpc(milvus_pb2.GetIndexStateResponse)
    def GetIndexState(self, request, context):
        """The older SDKs' (and Attu's) index poll: Finished as DescribeIndex's state."""
        _, _, pending = self._progress(request, context)
        state = common_pb2.InProgress if pending else common_pb2.Finished
        return milvus_pb2.GetIndexStateResponse(status=ok(), state=state)

    @rpc(milvus_pb2.GetIndexBuildProgressResponse)
    def GetIndexBuildProgress(self, request, context):
        total, indexed, _ = self._progress(request, context)
        return milvus_pb2.GetIndexBuildProgressResponse(
            status=ok(), indexed_rows=indexed, total_rows=total
        )

    @rpc(common_pb2.Status)
    def DropIndex(self, request, context):
        name = request.index_name
        if not name and request.field_name:
            info = self.proxy.describe_collection(ref_of(request, context))
            index = info.index_on(request.field_name)
            name = index.index_name if index else request.field_name
        self.proxy.drop_index(ref_of(request, context), name)
        return ok()

    @rpc(common_pb2.Status)
    def AlterIndex(self, request, context):
        """An index's ``mmap.enabled`` (pymilvus ``alter_index_properties``,
        ``drop_index_properties``)."""
        self.proxy.alter_index(
            ref_of(request, context),
            request.index_name,
            convert.kv_pairs(request.extra_params),
            list(request.delete_keys),
        )
        return ok()

    # -- load ----------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def LoadCollection(self, request, context):
        self.proxy.load_collection(
            ref_of(request, context), request.replica_number, list(request.resource_groups)
        )
        return ok()

    @rpc(common_pb2.Status)
    def ReleaseCollection(self, request, context):
        self.proxy.release_collection(ref_of(request, context))
        return ok()

    @rpc(common_pb2.Status)
    def LoadPartitions(self, request, context):
        self.proxy.load_partitions(
            ref_of(request, context),
            list(request.partition_names),
            request.replica_number,
            list(request.resource_groups),
        )
        return ok()

    @rpc(common_pb2.Status)
    def ReleasePartitions(self, request, context):
        self.proxy.release_partitions(ref_of(request, context), list(request.partition_names))
        return ok()

    @rpc(milvus_pb2.GetLoadingProgressResponse)
    def GetLoadingProgress(self, request, context):
        names = list(request.partition_names)
        _, progress = self.proxy.load_state(ref_of(request, context), names)
        return milvus_pb2.GetLoadingProgressResponse(
            status=ok(), progress=progress, refresh_progress=progress
        )

    @rpc(milvus_pb2.GetLoadStateResponse)
    def GetLoadState(self, request, context):
        names = list(request.partition_names)
        state, _ = self.proxy.load_state(ref_of(request, context), names)
        return milvus_pb2.GetLoadStateResponse(status=ok(), state=state)

    # -- writes --------------------------------------------------------------------------

    def _columns(self, request: Any, context: grpc.ServicerContext) -> tuple[str, dict, int]:
        info = self.proxy.meta.get(ref_of(request, context))
        if 0 < request.schema_timestamp < info.update_ts:
            # rows converted against the schema before a field was added or altered
            raise MilvusError(
                Code.COLLECTION_SCHEMA_MISMATCH,
                f"collection schema mismatch[collection={info.name}]: it changed at "
                f"{info.update_ts}, the request was built against {request.schema_timestamp}",
            )
        columns = convert.columns_from_fields_data(
            info.schema, request.fields_data, request.num_rows, time_zones.collection_zone(info)
        )
        return ref_of(request, context), columns, request.num_rows

    @rpc(milvus_pb2.MutationResult)
    def Insert(self, request, context):
        self._charge(limits.DML, request.ByteSize())
        name, columns, num_rows = self._columns(request, context)
        result = self.proxy.insert(name, request.partition_name, columns, num_rows)
        return self._mutation(result)

    @rpc(milvus_pb2.MutationResult)
    def Upsert(self, request, context):
        self._charge(limits.DML, request.ByteSize())
        name, columns, num_rows = self._columns(request, context)
        result = self.proxy.upsert(name, request.partition_name, columns, num_rows)
        return self._mutation(result)

    @rpc(milvus_pb2.MutationResult)
    def Delete(self, request, context):
        self._charge(limits.DML, request.ByteSize())
        result = self.proxy.delete(
            ref_of(request, context),
            request.partition_name,
            request.expr,
            template_values(request.expr_template_values),
        )
        return self._mutation(result)

    def _charge(self, kind: str, amount: float) -> None:
        """Meter the caller (the authenticated user, else ``anonymous``) for ``kind``."""
        self._limiter.charge(CURRENT_USER.get() or "anonymous", kind, amount)

    @staticmethod
    def _mutation(result: Any) -> milvus_pb2.MutationResult:
        if result.delete_count:  # Milvus >= 2.3.2 returns no keys for deletes
            return milvus_pb2.MutationResult(
                status=ok(), delete_cnt=result.delete_count, timestamp=result.ts
            )
        return milvus_pb2.MutationResult(
            status=ok(),
            IDs=convert.ids_proto(result.pks),
            succ_index=list(range(len(result.pks))),
            insert_cnt=result.insert_count,
            delete_cnt=result.delete_count,
            upsert_cnt=result.upsert_count,
            timestamp=result.ts,
        )

    # -- reads ---------------------------------------------------------------------------

    @rpc(milvus_pb2.QueryResults)
    def Query(self, request, context):
        self._charge(limits.QUERY, 1)
        params = {kv.key: kv.value for kv in request.query_params}
        limit = params.get("limit")
        spec = QuerySpec(
            limit=convert.int_param(limit, "limit") if limit not in (None, "") else None,
            offset=convert.int_param(params.get("offset") or 0, "offset"),
            group_by=params.get(GROUP_BY_PARAM, ""),
            **self._read_common(request, request.expr, context),
        )
        info, rows, outputs = self.proxy.query(spec)
        return convert.query_results(info, rows, outputs)

    def _read_common(self, request: Any, expr: str, context: grpc.ServicerContext) -> dict:
        params = _params_of(request)
        _refuse_later_features(params)
        return {
            "collection_name": ref_of(request, context),
            "expr": expr,
            # a HybridSearchRequest has none: its sub-requests carry their own
            "expr_params": template_values(getattr(request, "expr_template_values", {})),
            "partition_names": list(request.partition_names),
            "output_fields": list(request.output_fields),
            "guarantee_ts": request.guarantee_timestamp,
            # deprecated in Milvus 2.3+ and never set by pymilvus 2.6: time travel (raw gRPC)
            "travel_ts": request.travel_timestamp,
            "use_default_consistency": request.use_default_consistency,
            "consistency_level": convert.consistency_level(request.consistency_level),
            "deadline_s": context.time_remaining() if context is not None else None,
            "iterator": any(kv.key == "iterator" and kv.value.lower() == "true" for kv in params),
            "order_by": next((kv.value for kv in params if kv.key == ORDER_BY_PARAM), ""),
            **time_zones.read_params(params),
        }

    # -- flush ---------------------------------------------------------------------------

    @rpc(milvus_pb2.FlushResponse)
    def Flush(self, request, context):
        db_name = db_of(request, context)
        flushed = self.proxy.flush([qualified(db_name, n) for n in request.collection_names])
        response = milvus_pb2.FlushResponse(status=ok(), db_name=db_name)
        for ref, (segments, ts) in flushed.items():
            name = split(ref)[1]
            response.coll_segIDs[name].CopyFrom(schema_pb2.LongArray(data=segments))
            response.flush_coll_segIDs[name].CopyFrom(schema_pb2.LongArray())
            response.coll_seal_times[name] = timestamp.physical_ms(ts) // 1000
            response.coll_flush_ts[name] = ts
        return response

    @rpc(milvus_pb2.FlushAllResponse)
    def FlushAll(self, request, context):
        if request.flush_targets:
            raise errors.invalid("flush targets are not supported: flush collections by name")
        ts = self.proxy.flush_all(request.db_name)
        return milvus_pb2.FlushAllResponse(status=ok(), flush_all_ts=ts)

    @rpc(milvus_pb2.GetFlushAllStateResponse)
    def GetFlushAllState(self, request, context):
        flushed = self.proxy.flushed_all(request.flush_all_ts, request.db_name)
        return milvus_pb2.GetFlushAllStateResponse(status=ok(), flushed=flushed)

    @rpc(milvus_pb2.GetFlushStateResponse)
    def GetFlushState(self, request, context):
        collection = (
            qualified(db_of(request, context), request.collection_name)
            if request.collection_name
            else ""
        )
        flushed = self.proxy.flushed(list(request.segmentIDs), collection, request.flush_ts)
        return milvus_pb2.GetFlushStateResponse(status=ok(), flushed=flushed)

    @rpc(milvus_pb2.GetPersistentSegmentInfoResponse)
    def GetPersistentSegmentInfo(self, request, context):
        """Rows on S3 per segment, for every state: a client watches persistence with it."""
        collection_id, segments = self.proxy.persistent_segments(request.collectionName)
        return milvus_pb2.GetPersistentSegmentInfoResponse(
            status=ok(),
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
        """One entry per segment, naming every node that holds a copy (one per replica)."""
        collection_id, served = self.proxy.query_segments(request.collectionName)
        copies: dict[int, list] = {}
        for copy in served:
            copies.setdefault(copy.segment.segment_id, []).append(copy)
        infos = []
        for same in copies.values():
            s = same[0].segment
            infos.append(
                milvus_pb2.QuerySegmentInfo(
                    segmentID=s.segment_id,
                    collectionID=collection_id,
                    partitionID=s.partition_id,
                    mem_size=int(sum(c.memory_mb for c in same) * 2**20),
                    num_rows=s.assigned_rows if s.state == "Growing" else s.num_rows,
                    nodeID=same[0].node_id,
                    nodeIds=[c.node_id for c in same],
                    state=_segment_state(s.state),
                )
            )
        return milvus_pb2.GetQuerySegmentInfoResponse(status=ok(), infos=infos)

    @rpc(common_pb2.Status)
    def LoadBalance(self, request, context):
        """Move sealed segments between query nodes (pymilvus ``utility.load_balance``)."""
        self.proxy.load_balance(
            qualified(db_of(request, context), request.collectionName),
            request.src_nodeID,
            list(request.dst_nodeIDs),
            list(request.sealed_segmentIDs),
        )
        return ok()


def _segment_state(state: str) -> int:
    """Datacoord's state as Milvus's enum (Indexed is Flushed with an index to Milvus)."""
    return common_pb2.SegmentState.Value("Flushed" if state == "Indexed" else state)


def _index_params(index: IndexInfo) -> list[common_pb2.KeyValuePair]:
    """DescribeIndex's params: a scalar index has no metric type (Milvus lists none);
    AlterIndex's properties follow."""
    pairs = [common_pb2.KeyValuePair(key="index_type", value=index.index_type)]
    if index.metric_type:
        pairs.append(common_pb2.KeyValuePair(key="metric_type", value=index.metric_type))
    pairs.append(common_pb2.KeyValuePair(key="params", value=json.dumps(index.params)))
    pairs += [common_pb2.KeyValuePair(key=k, value=v) for k, v in index.properties.items()]
    return pairs


#: read parameters of Milvus 3.0 features (pymilvus 3 sends them): a server that ignored
#: them would answer another question than the one asked (no aggregates), so they are
#: refused by name (a query's ``group_by_fields`` is served: services/common/aggregation.py)
LATER_FEATURES = {
    "search_aggregation": "search aggregations",
}


def _params_of(request: Any) -> list[Any]:
    """A query's, search's or hybrid search's parameters (``query_params``,
    ``search_params``, ``rank_params``)."""
    for name in ("query_params", "search_params", "rank_params"):
        pairs = getattr(request, name, None)
        if pairs:
            return list(pairs)
    return []


def _refuse_later_features(params: list[Any]) -> None:
    for kv in params:
        feature = LATER_FEATURES.get(kv.key)
        if feature is not None and kv.value.strip():
            raise errors.invalid(
                f"{kv.key} ({feature}, Milvus 3.0) is not supported: Vectide serves the "
                "Milvus 2.6 API; sort or aggregate the results in the client"
            )
