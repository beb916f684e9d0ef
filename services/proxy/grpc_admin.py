"""The Milvus RPCs around collections rather than on them: databases, aliases, and what Attu
and the SDKs ask about the cluster (component states, system metrics, resource groups,
replicas). A mixin of :class:`services.proxy.grpc_service.MilvusService`, which supplies
``proxy``, ``_deploy_mode`` and ``_members``; each RPC forwards to the proxy core."""

from __future__ import annotations

import json
from collections.abc import Callable

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectide.services.common import errors
from vectide.services.common.errors import MilvusError
from vectide.services.common.names import DEFAULT_DB
from vectide.services.proxy import convert
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.grpc_common import MILVUS_VERSION, alias_of, db_of, ok, ref_of, rpc
from vectide.services.proxy.system_info import (
    DEFAULT_RESOURCE_GROUP,
    DEFAULT_RESOURCE_GROUP_CAPACITY,
    SYSTEM_INFO,
    Member,
    metric_type,
    system_topology,
)


class AdminRpcs:
    proxy: Proxy
    _deploy_mode: str
    _members: Callable[[], list[Member]]

    # -- databases -----------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateDatabase(self, request, context):
        self.proxy.create_database(request.db_name, convert.kv_pairs(request.properties))
        return ok()

    @rpc(common_pb2.Status)
    def DropDatabase(self, request, context):
        self.proxy.drop_database(request.db_name)
        return ok()

    @rpc(common_pb2.Status)
    def AlterDatabase(self, request, context):
        self.proxy.alter_database(
            request.db_name or DEFAULT_DB,
            convert.kv_pairs(request.properties),
            list(request.delete_keys),
        )
        return ok()

    @rpc(milvus_pb2.ListDatabasesResponse)
    def ListDatabases(self, request, context):
        dbs = self.proxy.list_databases()
        return milvus_pb2.ListDatabasesResponse(
            status=ok(),
            db_names=[d.name for d in dbs],
            db_ids=[d.db_id for d in dbs],
            created_timestamp=[d.create_ts for d in dbs],
        )

    @rpc(milvus_pb2.DescribeDatabaseResponse)
    def DescribeDatabase(self, request, context):
        db = self.proxy.describe_database(request.db_name or DEFAULT_DB)
        return milvus_pb2.DescribeDatabaseResponse(
            status=ok(),
            db_name=db.name,
            dbID=db.db_id,
            created_timestamp=db.create_ts,
            properties=[common_pb2.KeyValuePair(key=k, value=v) for k, v in db.properties.items()],
        )

    # -- aliases -------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateAlias(self, request, context):
        self.proxy.create_alias(ref_of(request, context), alias_of(request, context))
        return ok()

    @rpc(common_pb2.Status)
    def AlterAlias(self, request, context):
        self.proxy.alter_alias(ref_of(request, context), alias_of(request, context))
        return ok()

    @rpc(common_pb2.Status)
    def DropAlias(self, request, context):
        self.proxy.drop_alias(alias_of(request, context))
        return ok()

    @rpc(milvus_pb2.DescribeAliasResponse)
    def DescribeAlias(self, request, context):
        collection = self.proxy.describe_alias(alias_of(request, context))
        return milvus_pb2.DescribeAliasResponse(
            status=ok(), db_name=db_of(request, context), alias=request.alias, collection=collection
        )

    @rpc(milvus_pb2.ListAliasesResponse)
    def ListAliases(self, request, context):
        db_name = db_of(request, context)
        aliases = self.proxy.list_aliases(db_name, ref_of(request, context))
        return milvus_pb2.ListAliasesResponse(
            status=ok(),
            db_name=db_name,
            collection_name=request.collection_name,
            aliases=aliases,
        )

    # -- cluster: health, metrics, resource groups, replicas -----------------------------

    @rpc(milvus_pb2.ComponentStates)
    def GetComponentStates(self, request, context):
        """Healthy once serving: Attu and the SDKs' health checks ask before anything else."""
        self.proxy.rootcoord.alloc_timestamp()
        state = milvus_pb2.ComponentInfo(
            nodeID=self.proxy.server_id, role="proxy", state_code=common_pb2.StateCode.Healthy
        )
        return milvus_pb2.ComponentStates(state=state, status=ok())

    @rpc(milvus_pb2.GetMetricsResponse)
    def GetMetrics(self, request, context):
        kind = metric_type(request.request)
        if kind != SYSTEM_INFO:
            raise errors.invalid(f"unsupported metric type: {kind or '(none)'}")
        topology = system_topology(
            self._members(), self.proxy.server_id, self._deploy_mode, MILVUS_VERSION
        )
        return milvus_pb2.GetMetricsResponse(
            status=ok(),
            response=json.dumps(topology),
            component_name=f"proxy{self.proxy.server_id}",
        )

    @rpc(milvus_pb2.ListResourceGroupsResponse)
    def ListResourceGroups(self, request, context):
        return milvus_pb2.ListResourceGroupsResponse(
            status=ok(), resource_groups=[DEFAULT_RESOURCE_GROUP]
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
        loaded = self.proxy.show_collections(db_of(request, context), loaded_only=True)
        group = milvus_pb2.ResourceGroup(
            name=DEFAULT_RESOURCE_GROUP,
            capacity=DEFAULT_RESOURCE_GROUP_CAPACITY,
            num_available_node=len(nodes),
            num_loaded_replica={
                c.name: len(self.proxy.querycoord.replicas(c.collection_id)) for c in loaded
            },
            nodes=[common_pb2.NodeInfo(node_id=m.node_id, address=m.address) for m in nodes],
        )
        return milvus_pb2.DescribeResourceGroupResponse(status=ok(), resource_group=group)

    @rpc(milvus_pb2.GetReplicasResponse)
    def GetReplicas(self, request, context):
        """Each replica of a loaded collection, naming the query nodes that serve each
        shard (its leader first); an unloaded collection has none."""
        info = self.proxy.describe_collection(ref_of(request, context), request.collectionID)
        replicas = []
        for index, shards in enumerate(self.proxy.replica_shards(info)):
            replicas.append(
                milvus_pb2.ReplicaInfo(
                    replicaID=info.collection_id * 100 + index,
                    collectionID=info.collection_id,
                    partition_ids=[p.partition_id for p in info.partitions],
                    shard_replicas=[
                        milvus_pb2.ShardReplica(
                            leaderID=nodes[0],
                            dm_channel_name=vchannel,
                            node_ids=nodes if request.with_shard_nodes else [],
                        )
                        for vchannel, nodes in sorted(shards.items())
                    ],
                    node_ids=sorted({n for nodes in shards.values() for n in nodes}),
                    resource_group_name=DEFAULT_RESOURCE_GROUP,
                )
            )
        return milvus_pb2.GetReplicasResponse(status=ok(), replicas=replicas)
