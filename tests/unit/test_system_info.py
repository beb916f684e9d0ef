"""GetMetrics(system_info): the JSON Attu reads, shaped as Milvus's SystemTopology."""

from datetime import UTC, datetime

from vectide.services.proxy.system_info import Member, metric_type, system_topology


def test_metric_type_is_read_from_the_request_json():
    assert metric_type('{"metric_type": "system_info"}') == "system_info"
    assert metric_type("") == ""
    assert metric_type("not json") == ""
    assert metric_type("[1]") == ""


def test_topology_puts_this_proxy_first_connected_to_every_other_process():
    members = [
        Member("querynode", 7, "10.0.0.2:21123"),
        Member("proxy", 9, "10.0.0.3:19530"),
        Member("proxy", 3, "10.0.0.1:19530"),
        Member("rootcoord", 1, "10.0.0.1:53100"),
    ]
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    topology = system_topology(members, 3, "CLUSTER", "v2.6.0", now)
    nodes = topology["nodes_info"]
    assert [n["identifier"] for n in nodes] == [1, 2, 3, 4]
    first = nodes[0]["infos"]
    assert (first["type"], first["id"], first["name"]) == ("proxy", 3, "proxy3")
    assert first["system_info"]["deploy_mode"] == "CLUSTER"
    assert first["hardware_infos"]["ip"] == "10.0.0.1:19530"
    assert first["created_time"] == "2026-01-02 03:04:05"
    edges = nodes[0]["connected"]
    assert [e["connected_identifier"] for e in edges] == [2, 3, 4]
    assert {e["target_type"] for e in edges} == {"proxy", "querynode", "rootcoord"}
    assert all(n["connected"] == [] for n in nodes[1:])
    assert {n["infos"]["name"] for n in nodes} == {"proxy3", "proxy9", "querynode7", "rootcoord1"}
