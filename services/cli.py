"""The ``vectide`` command line."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import yaml

from vectide.services.common import logs
from vectide.services.common.config import Config, ConfigError, load_config
from vectide.services.common.kv.base import KVError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from vectide.services.common.security.store import ApiKey


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_infra(args: argparse.Namespace) -> int:
    from vectide.services.infra.components import InfraError
    from vectide.services.infra.manager import InfraManager

    manager = InfraManager(load_config(args.config), progress=_print)
    try:
        if args.action == "up":
            statuses = manager.up()
        elif args.action == "down":
            manager.down()
            return 0
        else:
            statuses = manager.status()
    except InfraError as exc:
        _print(f"error: {exc}")
        return 1
    if args.json:
        print(json.dumps([s.to_dict() for s in statuses], indent=2))
    else:
        for s in statuses:
            state = "healthy" if s.healthy else "DOWN"
            owner = f"pid {s.pid}" if s.pid else ("external" if not s.managed else "not running")
            print(f"{s.name:<10} {s.endpoint:<22} {state:<8} {owner}")
    return 0 if all(s.healthy for s in statuses) else 1


#: secrets `vectide config` shows masked: the effective configuration is often pasted into
#: tickets and chats
SECRET_KEYS = ("password", "secret")


def cmd_config(args: argparse.Namespace) -> int:
    config = load_config(args.config).to_dict()
    print(yaml.safe_dump(masked(config), sort_keys=False), end="")
    return 0


def masked(tree: object) -> object:
    """``tree`` with every non-empty value under a key naming a secret replaced by ``***``."""
    if not isinstance(tree, dict):
        return tree
    return {
        key: "***"
        if value and isinstance(value, str) and any(s in key for s in SECRET_KEYS)
        else masked(value)
        for key, value in tree.items()
    }


def cmd_schema(args: argparse.Namespace) -> int:
    from vectide.services.common.msgstream.codec import message_schema_json

    print(json.dumps(message_schema_json(), indent=2))
    return 0


def cmd_standalone(args: argparse.Namespace) -> int:
    from vectide.services.launcher import serve_forever, start_standalone

    config = load_config(args.config)
    deployment = start_standalone(
        config,
        querynodes=args.querynodes,
        proxy_port=args.port,
        coordinator_port=config.service.rootcoord_port,
        metrics_port=args.metrics_port,
        http_port=args.http_port,
        exit_on_lost=True,
    )
    http = config.service.http_port if args.http_port is None else args.http_port
    rest = f", REST API v2 on port {http}" if http else ""
    _print(f"vectide standalone: Milvus API on {', '.join(deployment.proxy_addresses)}{rest}")
    serve_forever(deployment)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from vectide.services.launcher import serve_forever, start_role

    config = load_config(args.config)
    deployment = start_role(config, args.role, args.port, args.metrics_port, args.http_port)
    _print(f"vectide {args.role}: running")
    serve_forever(deployment)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from vectide.services.infra.components import InfraError
    from vectide.services.infra.deployment import DeploymentManager

    manager = DeploymentManager(load_config(args.config), progress=_print)
    try:
        manager.up(
            args.mode,
            args.querynodes,
            args.proxies,
            datanode=not args.no_datanode,
            ingest=args.ingest,
            rootcoords=args.rootcoords,
        )
    except InfraError as exc:
        _print(f"error: {exc}")
        return 1
    return cmd_status(args)


def cmd_down(args: argparse.Namespace) -> int:
    from vectide.services.infra.deployment import DeploymentManager

    DeploymentManager(load_config(args.config), progress=_print).down(infra=not args.keep_infra)
    return 0


def cmd_supervise(args: argparse.Namespace) -> int:
    """Start and restart the recorded deployment's roles (``vectide up`` runs this)."""
    from vectide.services.infra.components import InfraError
    from vectide.services.infra.deployment import DeploymentManager

    try:
        DeploymentManager(load_config(args.config)).supervise()
    except InfraError as exc:
        _print(f"error: {exc}")
        return 1
    return 0


def _metrics_urls(roles) -> list[str]:
    """Where the query nodes' and the coordinators' figures are (standalone holds both)."""
    wanted = ("querynode", "rootcoord", "standalone")
    return [r.metrics for r in roles if r.role in wanted and r.pid and r.metrics != "-"]


def cmd_status(args: argparse.Namespace) -> int:
    from vectide.services.infra.deployment import DeploymentManager
    from vectide.services.infra.query_status import query_status

    manager = DeploymentManager(load_config(args.config))
    infra = manager.infra.status()
    roles = manager.status()
    supervisor = manager.supervisor_status()
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    "infra": [s.to_dict() for s in infra],
                    "roles": [asdict(r) for r in roles],
                    "supervisor": supervisor,
                    "spark": manager.spark_status(),
                    "query": query_status(_metrics_urls(roles)),
                },
                indent=2,
            )
        )
    else:
        for s in infra:
            print(
                f"{s.name:<12} {s.endpoint:<22} {'healthy' if s.healthy else 'DOWN':<8} "
                f"pid {s.pid or '-'}"
            )
        for r in roles:
            rest = f"  REST {r.rest}" if r.rest != "-" else ""
            state = f"  {r.state}" if r.state else ""
            restarts = f"  restarts {r.restarts} (last: {r.last_exit})" if r.restarts else ""
            print(
                f"{r.name:<12} {r.endpoint:<22} {'healthy' if r.healthy else 'DOWN':<8} "
                f"pid {r.pid or '-'}{rest}{state}{restarts}"
            )
        if roles and supervisor["enabled"]:
            print(
                f"{'supervisor':<12} {'-':<22} {'running' if supervisor['pid'] else 'DOWN':<8} "
                f"pid {supervisor['pid'] or '-'}"
            )
        spark = manager.spark_status()
        if spark["master"] or spark["driver_ui"]:
            print(
                f"spark        master {spark['master'] or '-'} ({spark['workers']} workers), "
                f"driver UI {spark['driver_ui'] or '-'}"
            )
        query = query_status(_metrics_urls(roles))
        for node in query["nodes"]:
            print(
                f"querynode {node['node_id']:<3} memory {node.get('memory_percent', 0):.1f} %  "
                f"{int(node.get('sealed_segments', 0))} sealed segments  "
                f"{int(node.get('rows', 0))} rows"
            )
    healthy = all(s.healthy for s in infra) and all(r.healthy for r in roles)
    healthy = healthy and (bool(supervisor["pid"]) or not supervisor["enabled"])
    return 0 if healthy and roles else 1


def cmd_ingest(args: argparse.Namespace) -> int:
    """`vectide ingest add|list|remove|schema`: Kafka topics mapped to collections."""
    from vectide.services.common.kv.zookeeper import connect_zookeeper
    from vectide.services.ingest.mapping import IngestMapping, MappingError
    from vectide.services.ingest.service import kafka_conf, mapping_store

    config = load_config(args.config)
    zk = connect_zookeeper(config.zookeeper)
    try:
        store = mapping_store(zk, config)
        if args.action == "add":
            mapping = IngestMapping(
                args.name,
                args.topic,
                args.collection,
                args.format,
                args.dlq or "",
                args.schema_registry or "",
                args.partition or "",
            )
            try:
                store.add(mapping)
            except MappingError as exc:
                _print(f"error: {exc}")
                return 2
            _print(
                f"mapping {mapping.name}: {mapping.topic} -> {mapping.collection} "
                f"({mapping.format}, dead letters to {mapping.dlq_topic})"
            )
        elif args.action == "remove":
            if not store.remove(args.name):
                _print(f"error: no mapping named {args.name!r}")
                return 1
            _print(f"mapping {args.name} removed")
        elif args.action == "schema":
            return _print_avro_schema(config, zk, args.collection)
        else:
            from vectide.services.ingest.topics import partition_ends

            conf = kafka_conf(config)
            stats = [s.to_dict() for s in store.stats(lambda t: partition_ends(conf, t))]
            if args.json:
                print(json.dumps(stats, indent=2))
            else:
                for s in stats:
                    print(
                        f"{s['name']:<16} {s['topic']} -> {s['collection']} ({s['format']}) "
                        f"lag {s['lag']} applied {s['applied']} failed {s['failed']} "
                        f"dlq {s['dlq']}"
                    )
    finally:
        zk.stop()
        zk.close()
    return 0


def cmd_apikey(args: argparse.Namespace) -> int:
    """`vectide apikey create|list|revoke`: API keys in the cluster's metastore, as the
    proxies read them (a revocation reaches every proxy through their store watch)."""
    import getpass

    from vectide.services.common.errors import MilvusError
    from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
    from vectide.services.common.security import audit
    from vectide.services.common.security.apikeys import ApiKeys
    from vectide.services.common.security.store import RbacStore

    config = load_config(args.config)
    if config.security.audit_log_file:
        audit.log_to_file(config.security.audit_log_file)
    zk = connect_zookeeper(config.zookeeper)
    operator = f"os:{getpass.getuser()}"  # who ran the command, for the audit log
    try:
        keys = ApiKeys(
            RbacStore(ZooKeeperKV(zk, cluster_root(config.zookeeper, config.cluster.name)))
        )
        if args.action == "list":
            return _list_apikeys(keys.list(args.user or ""), args.json)
        if args.action == "create":
            key, record = keys.create(args.user, args.name or "")
            _print(f"API key {record.key_id} ({record.name}) of user {record.user}, shown once:")
            print(key)
        else:
            record = keys.revoke(args.key, args.user or "")
            _print(f"API key {record.key_id} ({record.name}) of user {record.user} revoked")
        audit.record(
            operator,
            f"{args.action.title()}ApiKey",
            username=record.user,
            key_id=record.key_id,
            key_name=record.name,
        )
    except MilvusError as exc:
        _print(f"error: {exc.message}")
        return 1
    finally:
        zk.stop()
        zk.close()
    return 0


def _list_apikeys(keys: list[ApiKey], as_json: bool) -> int:
    if as_json:
        print(json.dumps([k.to_dict() for k in keys], indent=2))
        return 0
    for k in keys:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(k.created))
        print(f"{k.key_id}  {k.user:<16} {k.name:<24} created {created} UTC")
    return 0


def _print_avro_schema(config: Config, zk: KazooClient, collection: str) -> int:
    from vectide.services.common.discovery import ActiveClient
    from vectide.services.common.errors import MilvusError
    from vectide.services.common.kv.zookeeper import cluster_root
    from vectide.services.common.rpc.transport import use_tls
    from vectide.services.common.session import SessionRegistry
    from vectide.services.ingest.decode import avro_schema

    use_tls(config.security)
    registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
    try:
        info = ActiveClient(registry, "rootcoord", "RootCoord", patience_s=5).describe_collection(
            collection
        )
    except MilvusError as exc:
        _print(f"error: {exc.message}")
        return 1
    print(json.dumps(avro_schema(info.schema), indent=2))
    return 0


METRICS_PORT_HELP = "HTTP port of /metrics and /healthz (default: service.metrics_port, 9091)"
HTTP_PORT_HELP = "port of the Milvus RESTful API v2 (default: service.http_port, 19121; 0: off)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vectide", description=__doc__)
    parser.add_argument("--config", help="YAML config file (default: $VECTIDE_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)

    infra = sub.add_parser("infra", help="start, stop or check ZooKeeper, Kafka and S3")
    infra.add_argument("action", choices=["up", "down", "status"])
    infra.add_argument("--json", action="store_true", help="machine-readable status")
    infra.set_defaults(func=cmd_infra)

    up = sub.add_parser("up", help="start infra and Vectide in the background")
    up.add_argument("--mode", choices=["standalone", "cluster"], default="standalone")
    up.add_argument("--querynodes", type=int, default=1)
    up.add_argument("--proxies", type=int, default=1)
    up.add_argument(
        "--ingest", type=int, default=1, help="cluster mode: ingest role replicas (default 1)"
    )
    up.add_argument(
        "--rootcoords",
        type=int,
        default=2,
        help="cluster mode: rootcoord processes, one active and the others standby (default 2)",
    )
    up.add_argument("--json", action="store_true", help="print the status as JSON")
    up.add_argument(
        "--no-datanode",
        action="store_true",
        help="no Spark data node: data stays in the channels, nothing is flushed",
    )
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop what `vectide up` started")
    down.add_argument("--keep-infra", action="store_true", help="leave ZooKeeper/Kafka/S3")
    down.set_defaults(func=cmd_down)

    supervise = sub.add_parser(
        "supervise", help="start and restart the roles `vectide up` recorded (up runs it)"
    )
    supervise.set_defaults(func=cmd_supervise)

    status = sub.add_parser("status", help="infra and Vectide processes, with pids")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    standalone = sub.add_parser(
        "standalone", help="run every role but the data node in this process"
    )
    standalone.add_argument("--port", type=int, help="Milvus API port (default 19530)")
    standalone.add_argument("--querynodes", type=int, default=1)
    standalone.add_argument("--metrics-port", type=int, help=METRICS_PORT_HELP)
    standalone.add_argument("--http-port", type=int, help=HTTP_PORT_HELP)
    standalone.set_defaults(func=cmd_standalone)

    run = sub.add_parser("run", help="run one role of a cluster in this process")
    run.add_argument("role", choices=["rootcoord", "proxy", "querynode", "datanode", "ingest"])
    run.add_argument("--port", type=int, help="the role's port (default from config)")
    run.add_argument("--metrics-port", type=int, help=METRICS_PORT_HELP)
    run.add_argument("--http-port", type=int, help=HTTP_PORT_HELP + " (proxy only)")
    run.set_defaults(func=cmd_run)

    ingest = sub.add_parser("ingest", help="map Kafka topics to collections (no client code)")
    ingest_sub = ingest.add_subparsers(dest="action", required=True)
    add = ingest_sub.add_parser("add", help="ingest a topic's records into a collection")
    add.add_argument("name", help="the mapping's name (its consumer group: vectide-ingest-NAME)")
    add.add_argument("--topic", required=True)
    add.add_argument("--collection", required=True)
    add.add_argument("--format", choices=["json", "avro"], default="json")
    add.add_argument("--dlq", help="dead-letter topic (default: TOPIC.dlq)")
    add.add_argument(
        "--schema-registry", help="avro: Confluent Schema Registry URL (Confluent wire format)"
    )
    add.add_argument("--partition", help="the collection partition rows go to (default _default)")
    listing = ingest_sub.add_parser("list", help="mappings with lag, applied and failed records")
    listing.add_argument("--json", action="store_true")
    remove = ingest_sub.add_parser("remove", help="stop ingesting a mapping and forget it")
    remove.add_argument("name")
    schema_of = ingest_sub.add_parser(
        "schema", help="the Avro schema producers write a collection's plain-Avro records with"
    )
    schema_of.add_argument("collection")
    ingest.set_defaults(func=cmd_ingest)

    apikey = sub.add_parser("apikey", help="API keys: tokens that authenticate as a user")
    apikey_sub = apikey.add_subparsers(dest="action", required=True)
    create = apikey_sub.add_parser("create", help="a new key for a user, printed once")
    create.add_argument("--user", required=True, help="the user the key authenticates as")
    create.add_argument("--name", help="unique per user (default key-<id>)")
    keys_list = apikey_sub.add_parser("list", help="keys (never the keys themselves)")
    keys_list.add_argument("--user", help="only this user's keys")
    keys_list.add_argument("--json", action="store_true")
    revoke = apikey_sub.add_parser("revoke", help="refuse a key from now on, on every proxy")
    revoke.add_argument("key", help="the key's id (from list), its name, or the key itself")
    revoke.add_argument("--user", help="the key's user (to revoke by a name several share)")
    apikey.set_defaults(func=cmd_apikey)

    config = sub.add_parser("config", help="print the effective configuration")
    config.set_defaults(func=cmd_config)

    schema = sub.add_parser("schema", help="print the Avro schema of channel messages")
    schema.set_defaults(func=cmd_schema)
    return parser


def use_one_faiss_thread() -> None:
    """faiss's OpenMP runs each call on every core unless told otherwise, read once when
    faiss loads: a single-query search from a request thread then took 1.8x the time and
    3.6x the CPU (the second thread spins). Searches are one per request thread, so one
    OpenMP thread each; index builds ask for more in their own thread (``build_threads``)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    use_one_faiss_thread()
    logs.configure()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        _print(f"config error: {exc}")
        return 2
    except KVError as exc:  # an unreachable metastore or a refused ZooKeeper login
        _print(f"vectide: {exc}")
        return 1
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        _print(f"vectide: {exc.strerror}")  # a taken port: the message names it and the knob
        return 1


if __name__ == "__main__":
    sys.exit(main())
