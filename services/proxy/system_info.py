"""What GetMetrics(system_info) answers, built from plain values.

Attu draws its system view from GetMetrics' JSON, so the JSON follows Milvus's
``metricsinfo.SystemTopology`` (``nodes_info``: one node per process with ``identifier``,
``connected`` edges and ``infos``); fields Vectide cannot measure (CPU usage, disk) are zero,
as Milvus reports them when unknown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

#: Vectide's session role -> Milvus's component name (Milvus's ``typeutil.*Role``)
MILVUS_ROLES = {
    "proxy": "proxy",
    "rootcoord": "rootcoord",
    "querynode": "querynode",
    "datanode": "datanode",
}
#: the only metric type answered (Milvus's ``metricsinfo.SystemInfoMetrics``)
SYSTEM_INFO = "system_info"


@dataclass(frozen=True)
class Member:
    """One live process, as its session records it."""

    role: str
    node_id: int
    address: str


def metric_type(request_json: str) -> str:
    """The ``metric_type`` of a GetMetrics request; Milvus rejects a request without one."""
    try:
        value = json.loads(request_json or "{}").get("metric_type", "")
    except (ValueError, AttributeError):
        value = ""
    return str(value)


def system_topology(
    members: list[Member], self_id: int, deploy_mode: str, version: str, now: datetime | None = None
) -> dict:
    """Milvus's SystemTopology: this proxy first, connected to every other live process."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S")
    ordered = sorted(members, key=lambda m: (m.role != "proxy" or m.node_id != self_id, m.role))
    nodes = []
    for identifier, member in enumerate(ordered, start=1):
        edges = []
        if identifier == 1:
            edges = [
                {"connected_identifier": i, "type": "forward", "target_type": m.role}
                for i, m in enumerate(ordered[1:], start=2)
            ]
        nodes.append(
            {
                "identifier": identifier,
                "connected": edges,
                "infos": _infos(member, deploy_mode, version, stamp),
            }
        )
    return {"nodes_info": nodes}


def _infos(member: Member, deploy_mode: str, version: str, stamp: str) -> dict:
    role = MILVUS_ROLES.get(member.role, member.role)
    return {
        "has_error": False,
        "error_reason": "",
        "name": f"{role}{member.node_id}",
        "hardware_infos": {
            "ip": member.address,
            "cpu_core_count": 0,
            "cpu_core_usage": 0,
            "memory": 0,
            "memory_usage": 0,
            "disk": 0,
            "disk_usage": 0,
        },
        "system_info": {
            "system_version": version,
            "deploy_mode": deploy_mode,
            "build_version": version,
            "build_time": "",
            "used_go_version": "",
        },
        "created_time": stamp,
        "updated_time": stamp,
        "type": role,
        "id": member.node_id,
        "system_configurations": {},
    }
