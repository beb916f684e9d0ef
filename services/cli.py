"""The ``vectide`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

import yaml

from services.common import logs
from services.common.config import ConfigError, load_config


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_infra(args: argparse.Namespace) -> int:
    from services.infra.components import InfraError
    from services.infra.manager import InfraManager

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


def cmd_config(args: argparse.Namespace) -> int:
    print(yaml.safe_dump(load_config(args.config).to_dict(), sort_keys=False), end="")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from services.common.msgstream.codec import message_schema_json

    print(json.dumps(message_schema_json(), indent=2))
    return 0


def cmd_standalone(args: argparse.Namespace) -> int:
    from services.launcher import serve_forever, start_standalone

    config = load_config(args.config)
    deployment = start_standalone(
        config,
        querynodes=args.querynodes,
        proxy_port=args.port,
        coordinator_port=config.service.rootcoord_port,
    )
    _print(f"vectide standalone: Milvus API on {', '.join(deployment.proxy_addresses)}")
    serve_forever(deployment)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from services.launcher import serve_forever, start_role

    deployment = start_role(load_config(args.config), args.role, args.port)
    _print(f"vectide {args.role}: running")
    serve_forever(deployment)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from services.infra.components import InfraError
    from services.infra.deployment import DeploymentManager

    manager = DeploymentManager(load_config(args.config), progress=_print)
    try:
        manager.up(args.mode, args.querynodes, args.proxies, datanode=not args.no_datanode)
    except InfraError as exc:
        _print(f"error: {exc}")
        return 1
    return cmd_status(args)


def cmd_down(args: argparse.Namespace) -> int:
    from services.infra.deployment import DeploymentManager

    DeploymentManager(load_config(args.config), progress=_print).down(infra=not args.keep_infra)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from services.infra.deployment import DeploymentManager

    manager = DeploymentManager(load_config(args.config))
    infra = manager.infra.status()
    roles = manager.status()
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    "infra": [s.to_dict() for s in infra],
                    "roles": [asdict(r) for r in roles],
                    "spark": manager.spark_status(),
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
            print(
                f"{r.name:<12} {r.endpoint:<22} {'healthy' if r.healthy else 'DOWN':<8} "
                f"pid {r.pid or '-'}"
            )
        spark = manager.spark_status()
        if spark["master"] or spark["driver_ui"]:
            print(
                f"spark        master {spark['master'] or '-'} ({spark['workers']} workers), "
                f"driver UI {spark['driver_ui'] or '-'}"
            )
    healthy = all(s.healthy for s in infra) and all(r.healthy for r in roles)
    return 0 if healthy and roles else 1


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

    status = sub.add_parser("status", help="infra and Vectide processes, with pids")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    standalone = sub.add_parser(
        "standalone", help="run every role but the data node in this process"
    )
    standalone.add_argument("--port", type=int, help="Milvus API port (default 19530)")
    standalone.add_argument("--querynodes", type=int, default=1)
    standalone.set_defaults(func=cmd_standalone)

    run = sub.add_parser("run", help="run one role of a cluster in this process")
    run.add_argument("role", choices=["rootcoord", "proxy", "querynode", "datanode"])
    run.add_argument("--port", type=int, help="the role's port (default from config)")
    run.set_defaults(func=cmd_run)

    config = sub.add_parser("config", help="print the effective configuration")
    config.set_defaults(func=cmd_config)

    schema = sub.add_parser("schema", help="print the Avro schema of channel messages")
    schema.set_defaults(func=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    logs.configure()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        _print(f"config error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
