"""RESTful v2 ``/resource_groups`` (Milvus's routes and body shapes): create, alter,
describe, list, drop, transfer_replica, each one gRPC call of ``grpc_admin.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pymilvus.grpc_gen import milvus_pb2, rg_pb2

from vectide.services.proxy import rest_body as rb

if TYPE_CHECKING:
    from vectide.services.proxy.rest_call import Handler, RestCall, RestCaller


def config_of(body: dict[str, Any]) -> rg_pb2.ResourceGroupConfig:
    """A JSON config (``requests``/``limits`` of ``{"node_num": n}``, ``transfer_from``/
    ``transfer_to`` of ``{"resource_group": name}``, ``node_filter`` of ``{"node_labels":
    [{"key": k, "value": v}]}``) as the protobuf message; a missing ``requests`` or
    ``limits`` stays absent, for the gRPC handler to refuse as Milvus does."""
    config = rg_pb2.ResourceGroupConfig()
    for key in ("requests", "limits"):
        limit = rb.get(body, key, dict, None)
        if limit is not None:
            getattr(config, key).node_num = rb.get(limit, "node_num", int)
    for key in ("transfer_from", "transfer_to"):
        for item in rb.get(body, key, list, []):
            name = rb.get(item if isinstance(item, dict) else {}, "resource_group", str)
            getattr(config, key).add(resource_group=name)
    node_filter = rb.get(body, "node_filter", dict, {})
    for label in rb.get(node_filter, "node_labels", list, []):
        label = label if isinstance(label, dict) else {}
        config.node_filter.node_labels.add(
            key=rb.get(label, "key", str), value=rb.get(label, "value", str)
        )
    return config


def _group_json(group: milvus_pb2.ResourceGroup) -> dict[str, Any]:
    """A ResourceGroup as Milvus's REST server renders the message (its field names)."""
    config = group.config
    return {
        "name": group.name,
        "capacity": group.capacity,
        "num_available_node": group.num_available_node,
        "num_loaded_replica": dict(group.num_loaded_replica),
        "num_outgoing_node": dict(group.num_outgoing_node),
        "num_incoming_node": dict(group.num_incoming_node),
        "config": {
            "requests": {"node_num": config.requests.node_num},
            "limits": {"node_num": config.limits.node_num},
            "transfer_from": [{"resource_group": t.resource_group} for t in config.transfer_from],
            "transfer_to": [{"resource_group": t.resource_group} for t in config.transfer_to],
            "node_filter": {
                "node_labels": [
                    {"key": kv.key, "value": kv.value} for kv in config.node_filter.node_labels
                ]
            },
        },
        "nodes": [{"node_id": n.node_id, "address": n.address} for n in group.nodes],
    }


def resource_group_routes(api: RestCaller) -> dict[str, Handler]:
    def name(call: RestCall) -> str:
        return rb.get(call.body, "name", str)

    def create(call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.CreateResourceGroupRequest(resource_group=name(call))
        config = rb.get(call.body, "config", dict, None)
        if config is not None:
            request.config.CopyFrom(config_of(config))
        return api.empty("CreateResourceGroup", request, call)

    def alter(call: RestCall) -> dict[str, Any]:
        groups = rb.get(call.body, "resource_groups", dict)
        request = milvus_pb2.UpdateResourceGroupsRequest()
        for group, config in groups.items():
            request.resource_groups[group].CopyFrom(
                config_of(config if isinstance(config, dict) else {})
            )
        return api.empty("UpdateResourceGroups", request, call)

    def describe(call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.DescribeResourceGroupRequest(resource_group=name(call))
        found = api.call("DescribeResourceGroup", request, call.db_name)
        return {"resource_group": _group_json(found.resource_group)}

    def transfer(call: RestCall) -> dict[str, Any]:
        request = milvus_pb2.TransferReplicaRequest(
            source_resource_group=rb.get(call.body, "sourceRgName", str),
            target_resource_group=rb.get(call.body, "targetRgName", str),
            collection_name=rb.get(call.body, "collectionName", str),
            num_replica=rb.get(call.body, "replicaNum", int),
            db_name=call.db_name,
        )
        return api.empty("TransferReplica", request, call)

    return {
        "create": create,
        "alter": alter,
        "describe": describe,
        "list": lambda c: list(
            api.call(
                "ListResourceGroups", milvus_pb2.ListResourceGroupsRequest(), c.db_name
            ).resource_groups
        ),
        "drop": lambda c: api.empty(
            "DropResourceGroup", milvus_pb2.DropResourceGroupRequest(resource_group=name(c)), c
        ),
        "transfer_replica": transfer,
    }
