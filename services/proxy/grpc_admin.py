"""The Milvus RPCs around collections rather than on them: databases, aliases, and what Attu
and the SDKs ask about the cluster (component states, system metrics, resource groups,
replicas). A mixin of :class:`services.proxy.grpc_service.MilvusService`, which supplies
``proxy``, ``_deploy_mode`` and ``_members``; each RPC forwards to the proxy core."""

from __future__ import annotations

import json
from collections.abc import Callable

from pymilvus.grpc_gen import common_pb2, milvus_pb2, rg_pb2

from vectide.services.common import errors
from vectide.services.common.errors import MilvusError
from vectide.services.common.names import (
    DEFAULT_DB,
    DEFAULT_RESOURCE_GROUP,
    DEFAULT_RESOURCE_GROUP_CAPACITY,
)
from vectide.services.proxy import convert
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.grpc_common import MILVUS_VERSION, alias_of, db_of, ok, ref_of, rpc
from vectide.services.proxy.system_info import (
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

    # -- resource groups (the query coordinator's, ``services/querycoord/resource_groups.py``)

    @rpc(common_pb2.Status)
    def CreateResourceGroup(self, request, context):
        config = (
            _config_of(request.resource_group, request.config)
            if request.HasField("config")
            else None
        )
        self.proxy.querycoord.create_resource_group(request.resource_group, config)
        return ok()

    @rpc(common_pb2.Status)
    def UpdateResourceGroups(self, request, context):
        self.proxy.querycoord.update_resource_groups(
            {name: _config_of(name, cfg) for name, cfg in request.resource_groups.items()}
        )
        return ok()

    @rpc(common_pb2.Status)
    def DropResourceGroup(self, request, context):
        self.proxy.querycoord.drop_resource_group(request.resource_group)
        return ok()

    @rpc(common_pb2.Status)
    def TransferNode(self, request, context):
        self.proxy.querycoord.transfer_node(
            request.source_resource_group, request.target_resource_group, request.num_node
        )
        return ok()

    @rpc(common_pb2.Status)
    def TransferReplica(self, request, context):
        info = self.proxy.describe_collection(ref_of(request, context))
        self.proxy.querycoord.transfer_replica(
            request.source_resource_group,
            request.target_resource_group,
            info.collection_id,
            request.num_replica,
        )
        return ok()

    @rpc(milvus_pb2.ListResourceGroupsResponse)
    def ListResourceGroups(self, request, context):
        return milvus_pb2.ListResourceGroupsResponse(
            status=ok(), resource_groups=self.proxy.querycoord.list_resource_groups()
        )

    @rpc(milvus_pb2.DescribeResourceGroupResponse)
    def DescribeResourceGroup(self, request, context):
        """A group's config and nodes, and the request database's loaded collections with
        replicas in it (Attu's load dialog and its node view read this)."""
        found = self.proxy.querycoord.describe_resource_group(request.resource_group)
        names = {
            str(c.collection_id): c.name
            for c in self.proxy.show_collections(db_of(request, context), loaded_only=True)
        }
        addresses = {m.node_id: m.address for m in self._members() if m.role == "querynode"}
        config = found["config"]

        def named(counts: dict[str, int]) -> dict[str, int]:
            return {names[cid]: n for cid, n in counts.items() if cid in names}

        group = milvus_pb2.ResourceGroup(
            name=found["name"],
            # Milvus's deprecated capacity: the default group's limits, another's requests
            capacity=(
                DEFAULT_RESOURCE_GROUP_CAPACITY
                if found["name"] == DEFAULT_RESOURCE_GROUP
                else config["requests"]
            ),
            num_available_node=len(found["nodes"]),
            num_loaded_replica=named(found["replicas"]),
            num_outgoing_node=named(found["outgoing"]),
            num_incoming_node=named(found["incoming"]),
            config=rg_pb2.ResourceGroupConfig(
                requests=rg_pb2.ResourceGroupLimit(node_num=config["requests"]),
                limits=rg_pb2.ResourceGroupLimit(node_num=config["limits"]),
                transfer_from=[
                    rg_pb2.ResourceGroupTransfer(resource_group=g) for g in config["transfer_from"]
                ],
                transfer_to=[
                    rg_pb2.ResourceGroupTransfer(resource_group=g) for g in config["transfer_to"]
                ],
                node_filter=rg_pb2.ResourceGroupNodeFilter(
                    node_labels=[
                        common_pb2.KeyValuePair(key=k, value=v)
                        for k, v in config["node_labels"].items()
                    ]
                ),
            ),
            nodes=[
                common_pb2.NodeInfo(node_id=n, address=addresses.get(n, "")) for n in found["nodes"]
            ],
        )
        return milvus_pb2.DescribeResourceGroupResponse(status=ok(), resource_group=group)

    @rpc(milvus_pb2.GetReplicasResponse)
    def GetReplicas(self, request, context):
        """Each replica of a loaded collection, naming the query nodes that serve each
        shard (its leader first); an unloaded collection has none."""
        info = self.proxy.describe_collection(ref_of(request, context), request.collectionID)
        replicas = []
        placed = self.proxy.replica_shards(info)
        groups = self.proxy.querycoord.replica_groups(info.collection_id) if placed else []
        for index, shards in enumerate(placed):
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
                    resource_group_name=groups[index],
                )
            )
        return milvus_pb2.GetReplicasResponse(status=ok(), replicas=replicas)


def _config_of(name: str, config: rg_pb2.ResourceGroupConfig) -> dict[str, object]:
    """A ResourceGroupConfig as the query coordinator takes it; both numbers are required,
    as Milvus requires them."""
    if not config.HasField("requests") or not config.HasField("limits"):
        raise MilvusError(
            errors.Code.RESOURCE_GROUP_ILLEGAL_CONFIG,
            f"resource group illegal config[rg={name}]: requests or limits is required",
        )
    return {
        "requests": config.requests.node_num,
        "limits": config.limits.node_num,
        "transfer_from": [t.resource_group for t in config.transfer_from],
        "transfer_to": [t.resource_group for t in config.transfer_to],
        "node_labels": {kv.key: kv.value for kv in config.node_filter.node_labels},
    }
