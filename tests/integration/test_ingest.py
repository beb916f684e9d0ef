"""Kafka producer ingestion end to end: topics mapped with the CLI, records produced by a plain
confluent-kafka producer, rows searchable through pymilvus, refused records on the dead-letter
topic, and ingest workers killed with SIGKILL mid-stream."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fastavro
import numpy as np
import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pymilvus import DataType, MilvusClient

from tests.integration.conftest import free_port, isolated
from vectide.services.cli import main as vectide
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
from vectide.services.common.msgstream.message import DataType as MsgType
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.common.session import SessionRegistry
from vectide.services.infra.deployment import DeploymentManager, plan
from vectide.services.ingest.dlq import DeadLetterProducer
from vectide.services.ingest.mapping import IngestMapping, MappingStore
from vectide.services.ingest.service import IngestService
from vectide.services.ingest.worker import MappingRunner, RunnerConfig
from vectide.services.launcher import start_standalone

DIM = 8


@pytest.fixture(scope="module")
def deployment(infra, tmp_path_factory):
    """A standalone deployment without its in-process ingest role: the tests run the role as
    users of a cluster do, `vectide run ingest` processes, and kill them."""
    config = isolated(infra, "i")
    port = free_port()
    running = start_standalone(config, proxy_port=port, coordinator_port=free_port(), ingest=False)
    config_file = tmp_path_factory.mktemp("ingest") / "vectide.yaml"
    config_file.write_text(yaml.safe_dump(config.to_dict()))
    workers = Workers(config)
    yield config, MilvusClient(uri=f"http://127.0.0.1:{port}"), str(config_file), workers
    workers.stop_all()
    running.stop()


class Workers:
    """`vectide run ingest` processes."""

    def __init__(self, config) -> None:
        self.config = config
        self.procs: list[subprocess.Popen] = []

    def start(self) -> subprocess.Popen:
        before = self.members()
        proc = subprocess.Popen(
            # each worker its own /metrics port: the standalone in this process holds the config's
            [
                sys.executable,
                "-m",
                "vectide.services.cli",
                "run",
                "ingest",
                "--metrics-port",
                str(free_port()),
            ],
            env={**os.environ, **self.config.to_env()},
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(proc)
        deadline = time.monotonic() + 60
        while self.members() <= before:
            assert proc.poll() is None, "ingest worker exited during start-up"
            assert time.monotonic() < deadline
            time.sleep(0.2)
        return proc

    def members(self) -> set[int]:
        client = connect_zookeeper(self.config.zookeeper)
        try:
            root = cluster_root(self.config.zookeeper, self.config.cluster.name)
            return {m.pid for m in SessionRegistry(client, root).members("ingest").values()}
        finally:
            client.stop()
            client.close()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def cli(config_file: str, *args: str, capsys=None) -> str:
    assert vectide(["--config", config_file, *args]) == 0
    return capsys.readouterr().out if capsys is not None else ""


def create_topic(config, partitions: int) -> str:
    topic = f"user-events-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": config.kafka.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)
    return topic


def create_collection(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("tag", DataType.VARCHAR, max_length=32)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)


def producer(config) -> Producer:
    return Producer({"bootstrap.servers": config.kafka.bootstrap_servers, "linger.ms": 5})


def vector(pk: int, version: int = 0) -> list[float]:
    return [float(pk) + 0.5 * version] * DIM


def read_topic(config, topic: str, expected: int, timeout_s: float = 60) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": config.kafka.bootstrap_servers,
            "group.id": f"check-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
    found = []
    deadline = time.monotonic() + timeout_s
    while len(found) < expected and time.monotonic() < deadline:
        found += [m for m in consumer.consume(500, 0.2) if m.error() is None]
    consumer.close()
    return found


def count(client: MilvusClient, name: str) -> int:
    rows = client.query(name, output_fields=["count(*)"], consistency_level="Strong")
    return rows[0]["count(*)"]


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def mapping_stats(config_file: str, capsys, name: str) -> dict:
    listed = json.loads(cli(config_file, "ingest", "list", "--json", capsys=capsys))
    return next(m for m in listed if m["name"] == name)


@pytest.mark.heavy
def test_exact_counts_dead_letters_and_sigkill_of_a_worker(deployment, capsys):
    config, client, config_file, workers = deployment
    name = f"events_{uuid.uuid4().hex[:6]}"
    create_collection(client, name)
    topic = create_topic(config, 4)
    cli(config_file, "ingest", "add", "events", "--topic", topic, "--collection", name)
    first = workers.start()
    workers.start()

    expected: dict[int, float] = {}  # pk -> first vector component, the model of the result
    bad: dict[bytes, bytes] = {}  # key -> value of every record that must be dead-lettered
    p = producer(config)

    def send(key: bytes, value: bytes | None) -> None:
        p.produce(topic, key=key, value=value)
        p.poll(0)

    def produce_batch(lo: int, hi: int, version: int) -> None:
        for pk in range(lo, hi):
            body = {"vec": vector(pk, version), "tag": f"v{version}"}
            if pk % 3:  # two thirds carry the primary key in the value too
                body["id"] = pk
            send(str(pk).encode(), json.dumps(body).encode())
            expected[pk] = vector(pk, version)[0]
            if pk % 1000 == 7:  # malformed records of every kind, keyed apart
                for i, value in enumerate(
                    [
                        b"{not json",
                        json.dumps({"id": pk, "vec": [1.0] * (DIM + 1), "tag": "x"}).encode(),
                        json.dumps({"id": pk, "tag": "no vector"}).encode(),
                        json.dumps({"id": pk, "vec": vector(pk), "tag": 5}).encode(),
                    ]
                ):
                    key = f"bad-{pk}-{version}-{i}".encode()
                    bad[key] = value
                    send(key, value)

    produce_batch(0, 12_000, 0)
    p.flush(30)
    # SIGKILL one worker while records flow; a new replica joins
    killer = threading.Timer(0.5, lambda: os.killpg(first.pid, signal.SIGKILL))
    killer.start()
    produce_batch(12_000, 24_000, 0)
    killer.join()
    workers.start()
    for pk in range(0, 3000):  # tombstones
        send(str(pk).encode(), None)
        expected.pop(pk, None)
    produce_batch(1000, 2000, 1)  # re-sent after their tombstones
    p.flush(30)

    total = 24_000 + 3000 + 1000 + len(bad)
    stats = wait_for(
        lambda: (
            (s := mapping_stats(config_file, capsys, "events"))["lag"] == 0
            and s["applied"] + s["failed"] == total
            and s
        ),
        240,
        "the mapping to catch up",
    )
    assert stats["failed"] == len(bad)
    assert stats["applied"] == total - len(bad)
    assert count(client, name) == len(expected)
    for pk in (1500, 2500, 3000, 23_999):
        rows = client.query(name, filter=f"id == {pk}", output_fields=["vec", "tag"])
        if pk in expected:
            assert rows and rows[0]["vec"][0] == pytest.approx(expected[pk]), pk
        else:
            assert rows == [], pk

    letters = read_topic(config, f"{topic}.dlq", len(bad))
    assert {m.key(): m.value() for m in letters} == bad  # each exactly once, bytes intact
    assert len(letters) == len(bad)
    for m in letters:
        headers = {k: v.decode() for k, v in m.headers()}
        assert headers["source.topic"] == topic
        assert int(headers["source.partition"]) in range(4)
        assert int(headers["source.offset"]) >= 0
        assert headers["error"]
    reasons = {m.key(): dict(m.headers())["error"].decode() for m in letters}
    assert any("not valid JSON" in r for r in reasons.values())
    assert any("dimension 9, expected 8" in r for r in reasons.values())
    assert any("'vec' is missing" in r for r in reasons.values())
    assert any("'tag': expected a string" in r for r in reasons.values())
    cli(config_file, "ingest", "remove", "events")


class RegistryDouble:
    """The Schema Registry REST subset confluent-kafka's client calls: schemas by id."""

    def __init__(self, schemas: dict[int, dict]) -> None:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                match = re.match(r"/schemas/ids/(\d+)", self.path)
                schema = registry.schemas.get(int(match.group(1))) if match else None
                body = json.dumps(
                    {"schema": json.dumps(schema), "schemaType": "AVRO"}
                    if schema
                    else {"error_code": 40403, "message": "Schema not found"}
                ).encode()
                self.send_response(200 if schema else 404)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.schemas = schemas
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def test_avro_formats_tombstones_and_a_dropped_collection(deployment, capsys):
    config, client, config_file, workers = deployment
    name = f"avro_{uuid.uuid4().hex[:6]}"
    create_collection(client, name)
    plain_topic, framed_topic = create_topic(config, 2), create_topic(config, 1)
    if not workers.members():
        workers.start()

    derived = json.loads(cli(config_file, "ingest", "schema", name, capsys=capsys))
    assert [f["name"] for f in derived["fields"]] == ["id", "vec", "tag"]
    writer = {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "vec", "type": {"type": "array", "items": "float"}},
            {"name": "tag", "type": "string"},
        ],
    }
    registry = RegistryDouble({42: writer})
    try:
        cli(
            config_file,
            "ingest",
            "add",
            "plain",
            "--topic",
            plain_topic,
            "--collection",
            name,
            "--format",
            "avro",
        )
        cli(
            config_file,
            "ingest",
            "add",
            "framed",
            "--topic",
            framed_topic,
            "--collection",
            name,
            "--format",
            "avro",
            "--schema-registry",
            registry.url,
            "--dlq",
            "framed-dead",
        )
        p = producer(config)
        parsed, parsed_writer = fastavro.parse_schema(derived), fastavro.parse_schema(writer)
        for pk in range(100):
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, {"id": None, "vec": vector(pk), "tag": "a"})
            p.produce(plain_topic, key=str(pk).encode(), value=out.getvalue())
        for pk in range(100, 150):
            out = io.BytesIO()
            fastavro.schemaless_writer(
                out, parsed_writer, {"id": pk, "vec": vector(pk), "tag": "b"}
            )
            p.produce(framed_topic, value=b"\x00" + struct.pack(">I", 42) + out.getvalue())
        p.produce(framed_topic, key=b"k", value=b"\x00" + struct.pack(">I", 7) + b"\x02")
        p.produce(plain_topic, key=b"5", value=None)  # tombstone
        p.flush(30)
        wait_for(lambda: count(client, name) == 149, 60, "149 rows")
        assert client.query(name, filter="id == 5") == []
        dead = read_topic(config, "framed-dead", 1)
        assert b"schema id 7 not resolved" in dict(dead[0].headers())["error"]
        # searchable, not just countable
        hits = client.search(name, [vector(120)], limit=1, output_fields=["tag"])
        assert hits[0][0]["entity"]["tag"] == "b"

        # a dropped collection: records go to the dead-letter topic, the worker lives on
        client.drop_collection(name)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"id": 1, "vec": vector(1), "tag": "gone"})
        p.produce(plain_topic, key=b"1", value=out.getvalue())
        p.flush(10)
        letters = read_topic(config, f"{plain_topic}.dlq", 1)
        assert b"does not exist" in dict(letters[0].headers())["error"]
        create_collection(client, name)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"id": 1, "vec": vector(1), "tag": "c"})
        p.produce(plain_topic, key=b"1", value=out.getvalue())
        p.flush(10)
        wait_for(lambda: count(client, name) == 1, 60, "ingest to resume after re-creation")
    finally:
        registry.close()
        for mapping in ("plain", "framed"):
            vectide(["--config", config_file, "ingest", "remove", mapping])


TYPED_ROWS = 60


def create_typed_collection(client: MilvusClient, name: str) -> None:
    """Every vector type and ARRAY fields, each vector field indexed (a load needs them all)."""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("fv", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("f16", DataType.FLOAT16_VECTOR, dim=DIM)
    schema.add_field("bf16", DataType.BFLOAT16_VECTOR, dim=DIM)
    schema.add_field("bin", DataType.BINARY_VECTOR, dim=16)
    schema.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("nums", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4)
    schema.add_field(
        "tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=3, max_length=8
    )
    schema.add_field("meta", DataType.JSON)
    index = client.prepare_index_params()
    for field in ("fv", "f16", "bf16"):
        index.add_index(field, index_type="FLAT", metric_type="L2")
    index.add_index("bin", index_type="BIN_FLAT", metric_type="HAMMING")
    index.add_index("sp", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    client.create_collection(name, schema=schema, index_params=index)


def typed_rows() -> list[dict]:
    """Rows in the types' plain forms: half floats exact in their type, sparse on a grid."""
    from vectide.services.common.vector_types import as_float32, bfloat16_bits

    rng = np.random.default_rng(5)
    rows = []
    for pk in range(TYPED_ROWS):
        sparse = {int(i): float(rng.integers(1, 8)) / 8 for i in rng.choice(50, 3, False)}
        rows.append(
            {
                "id": pk,
                "fv": rng.standard_normal(DIM).astype(np.float32),
                "f16": rng.standard_normal(DIM).astype(np.float16),
                "bf16": bfloat16_bits(rng.standard_normal(DIM).astype(np.float32)),
                "bin": rng.integers(0, 256, 2).astype(np.uint8),
                "sp": sparse,
                "nums": rng.integers(-100, 100, int(rng.integers(0, 5))).tolist(),
                "tags": [f"t{pk % 3}", "x"][: pk % 3],
                "meta": {"pk": pk, "odd": bool(pk % 2)},
            }
        )
        rows[-1]["bf16_wide"] = as_float32(MsgType.BFLOAT16_VECTOR, rows[-1]["bf16"])
    return rows


def typed_json(row: dict) -> bytes:
    """A row as a JSON producer writes it; the pk's parity picks among the equivalent forms."""
    odd = row["id"] % 2
    sparse = row["sp"]
    return json.dumps(
        {
            "fv": row["fv"].tolist(),
            "f16": row["f16"].astype(np.float32).tolist(),
            "bf16": row["bf16_wide"].tolist(),
            "bin": base64.b64encode(row["bin"].tobytes()).decode() if odd else row["bin"].tolist(),
            "sp": {"indices": list(sparse), "values": list(sparse.values())}
            if odd
            else {str(k): v for k, v in sparse.items()},
            "nums": row["nums"],
            "tags": row["tags"],
            "meta": row["meta"],
        }
    ).encode()


#: a Schema Registry writer's forms: vectors as bytes, sparse as indices and values
TYPED_WRITER = {
    "type": "record",
    "name": "Typed",
    "fields": [
        {"name": "id", "type": "long"},
        *({"name": name, "type": "bytes"} for name in ("fv", "f16", "bf16", "bin")),
        {
            "name": "sp",
            "type": {
                "type": "record",
                "name": "Sparse",
                "fields": [
                    {"name": "indices", "type": {"type": "array", "items": "long"}},
                    {"name": "values", "type": {"type": "array", "items": "float"}},
                ],
            },
        },
        {"name": "nums", "type": {"type": "array", "items": "long"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "meta", "type": "string"},
    ],
}


def typed_avro(schema, row: dict, as_bytes: bool = False) -> bytes:
    """Plain Avro with the derived schema, or (``as_bytes``) TYPED_WRITER's forms."""
    out = io.BytesIO()
    value = {
        "id": row["id"],
        "fv": row["fv"].tolist(),
        "f16": row["f16"].astype(np.float32).tolist(),
        "bf16": row["bf16_wide"].tolist(),
        "bin": row["bin"].tobytes(),
        "sp": {str(k): v for k, v in row["sp"].items()},
        "nums": row["nums"],
        "tags": row["tags"],
        "meta": json.dumps(row["meta"]),
    }
    if as_bytes:
        value.update(
            {name: row[name].tobytes() for name in ("fv", "f16", "bf16")},
            sp={"indices": list(row["sp"]), "values": list(row["sp"].values())},
        )
    fastavro.schemaless_writer(out, schema, value)
    return out.getvalue()


def test_every_vector_type_and_arrays_ingest_as_pymilvus_inserts_them(deployment, capsys):
    """A third of the rows as JSON, a third as plain Avro, a third framed for a Schema
    Registry, into one collection; the same rows inserted with pymilvus into another; both
    answer the same queries and searches."""
    config, client, config_file, workers = deployment
    run = uuid.uuid4().hex[:6]
    ingested, inserted = f"typed_k_{run}", f"typed_p_{run}"
    create_typed_collection(client, ingested)
    create_typed_collection(client, inserted)
    rows = typed_rows()
    client.insert(
        inserted,
        [
            {**{k: v for k, v in r.items() if k != "bf16_wide"}, "bf16": r["bf16"].tobytes()}
            for r in rows
        ],
    )
    json_topic, avro_topic, sr_topic = (create_topic(config, n) for n in (2, 1, 1))
    registry = RegistryDouble({9: TYPED_WRITER})
    if not workers.members():
        workers.start()
    derived = json.loads(cli(config_file, "ingest", "schema", ingested, capsys=capsys))
    parsed = fastavro.parse_schema(derived)
    mappings = {
        "typed-json": (json_topic, "json"),
        "typed-avro": (avro_topic, "avro"),
        "typed-sr": (sr_topic, "avro", "--schema-registry", registry.url),
    }
    for mapping, (topic, *options) in mappings.items():
        cli(config_file, "ingest", "add", mapping, "--topic", topic, "--collection", ingested,
            "--format", *options)  # fmt: skip
    try:
        p = producer(config)
        third = TYPED_ROWS // 3
        for row in rows[:third]:
            p.produce(json_topic, key=str(row["id"]).encode(), value=typed_json(row))
        for row in rows[third : 2 * third]:
            p.produce(avro_topic, value=typed_avro(parsed, row))
        writer = fastavro.parse_schema(TYPED_WRITER)
        for row in rows[2 * third :]:
            framed = b"\x00" + struct.pack(">I", 9) + typed_avro(writer, row, as_bytes=True)
            p.produce(sr_topic, value=framed)
        bad = dict(rows[0], f16=np.zeros(DIM + 1, np.float16))
        p.produce(json_topic, key=b"bad", value=typed_json(bad))
        p.flush(30)
        wait_for(lambda: count(client, ingested) == TYPED_ROWS, 60, f"{TYPED_ROWS} rows")
        (letter,) = read_topic(config, f"{json_topic}.dlq", 1)
        assert letter.key() == b"bad"
        assert "'f16': dimension 9, expected 8" in dict(letter.headers())["error"].decode()

        fields = ["fv", "f16", "bf16", "bin", "sp", "nums", "tags", "meta"]

        def everything(name: str) -> list[dict]:
            got = client.query(name, "id >= 0", output_fields=fields, consistency_level="Strong")
            return sorted(got, key=lambda r: r["id"])

        both = (ingested, inserted)
        assert everything(ingested) == everything(inserted)
        assert len(everything(ingested)) == TYPED_ROWS
        queries = {
            "fv": [rows[7]["fv"].tolist()],
            "f16": [rows[40]["f16"]],
            "bf16": [rows[41]["bf16"].tobytes()],
            "bin": [rows[9]["bin"].tobytes()],
            "sp": [rows[50]["sp"]],
        }
        for field, data in queries.items():  # ties may order apart: distances, and the best
            hits = [client.search(name, data, anns_field=field, limit=5)[0] for name in both]
            distances = [[h["distance"] for h in found] for found in hits]
            assert distances[0] == pytest.approx(distances[1]), field
            if field != "sp":
                assert hits[0][0]["id"] == hits[1][0]["id"], field
        assert client.query(ingested, "array_contains(tags, 'x')", output_fields=["id"]) and (
            sorted(r["id"] for r in client.query(ingested, "array_contains(tags, 'x')"))
            == sorted(r["id"] for r in client.query(inserted, "array_contains(tags, 'x')"))
        )
    finally:
        registry.close()
        for mapping in mappings:
            vectide(["--config", config_file, "ingest", "remove", mapping])


def test_standalone_ingests_in_process(standalone, tmp_path, capsys):
    """`vectide standalone` (and `vectide up`) run the ingest role inside the process."""
    config_file = tmp_path / "vectide.yaml"
    config_file.write_text(yaml.safe_dump(standalone.config.to_dict()))
    client = MilvusClient(uri=standalone.uri)
    name = f"local_{uuid.uuid4().hex[:6]}"
    create_collection(client, name)
    topic = create_topic(standalone.config, 1)
    cli(str(config_file), "ingest", "add", "local", "--topic", topic, "--collection", name)
    p = producer(standalone.config)
    for pk in range(500):
        p.produce(topic, value=json.dumps({"id": pk, "vec": vector(pk), "tag": "x"}).encode())
    p.flush(10)
    wait_for(lambda: count(client, name) == 500, 60, "500 rows")
    stats = wait_for(
        lambda: (s := mapping_stats(str(config_file), capsys, "local"))["lag"] == 0 and s,
        30,
        "lag 0",
    )
    assert stats["applied"] == 500 and stats["failed"] == 0
    hits = client.search(name, [np.asarray(vector(33)).tolist()], limit=1)
    assert hits[0][0]["id"] == 33 and hits[0][0]["distance"] == 0.0


def test_vectide_up_lists_the_ingest_role_in_both_modes(infra):
    config = isolated(infra, "u")
    config.service.proxy_port, config.service.rootcoord_port = free_port(), free_port()
    manager = DeploymentManager(config)
    try:
        manager.up("standalone", datanode=False)
        roles = {r.name: r for r in manager.status()}
        assert roles["ingest"].healthy and roles["ingest"].pid == roles["standalone"].pid
    finally:
        manager.down(infra=False)
    cluster = plan(config, "cluster", querynodes=1, proxies=1, datanode=False, ingest=2)
    workers = [r for r in cluster if r.role == "ingest"]
    assert [r.args[:2] for r in workers] == [["run", "ingest"]] * 2
    assert len({r.metrics_port for r in workers}) == 2  # one host: one metrics port each


class FlakyProxy:
    """A proxy that pushes back (SERVICE_UNAVAILABLE) for its first ``refusals`` writes."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.rows: dict[int, float] = {}
        self.writes = 0

    def describe_collection(self, name):
        fields = [
            FieldSchema(100, "id", MsgType.INT64, is_primary=True),
            FieldSchema(101, "vec", MsgType.FLOAT_VECTOR, dim=DIM),
            FieldSchema(102, "tag", MsgType.VARCHAR, max_length=32),
        ]
        schema = CollectionSchema(name, fields)
        return CollectionInfo(1, name, schema, 1, [], [], ConsistencyLevel.BOUNDED, 0)

    def upsert(self, collection, partition, columns, num_rows):
        self.writes += 1
        if self.refusals > 0:
            self.refusals -= 1
            raise MilvusError(Code.SERVICE_UNAVAILABLE, "proxy is overloaded")
        for pk, vec in zip(columns["id"].data, columns["vec"].data, strict=True):
            self.rows[int(pk)] = float(vec[0])


def test_a_pushing_back_proxy_pauses_the_mapping_and_loses_nothing(infra, zk_kv):
    topic = create_topic(infra, 2)
    mapping = IngestMapping("flaky", topic, "docs")
    store = MappingStore(zk_kv)
    store.add(mapping)
    proxy = FlakyProxy(refusals=4)
    conf = {"bootstrap.servers": infra.kafka.bootstrap_servers}
    runner = MappingRunner(
        mapping,
        proxy,
        store,
        DeadLetterProducer(conf),
        RunnerConfig(
            batch_rows=500,
            consumer={**conf, "session.timeout.ms": 6000, "max.poll.interval.ms": 10000},
        ),
    ).start()
    try:
        p = producer(infra)
        for pk in range(3000):
            p.produce(topic, key=str(pk).encode(), value=json.dumps(
                {"vec": vector(pk), "tag": "x"}).encode())  # fmt: skip
        p.flush(30)
        wait_for(lambda: len(proxy.rows) == 3000, 60, "every row through the flaky proxy")
        assert proxy.refusals == 0 and proxy.writes > 4
        assert proxy.rows == {pk: vector(pk)[0] for pk in range(3000)}
        (stats,) = store.stats()
        assert stats.to_dict()["applied"] == 3000 and stats.to_dict()["failed"] == 0
    finally:
        runner.stop()


def test_a_new_mapping_starts_at_once_not_at_the_next_refresh(infra):
    """The ingest service watches the mapping list: with a 60 s refresh, a mapping added
    through the metastore still carries records within seconds."""
    config = isolated(infra, "w")
    config.ingest.refresh_s = 60.0
    zk = connect_zookeeper(config.zookeeper)
    proxy = FlakyProxy(refusals=0)
    service = IngestService(config, zk, proxy).start()
    try:
        topic = create_topic(infra, 1)
        p = producer(infra)
        for pk in range(100):
            p.produce(topic, key=str(pk).encode(), value=json.dumps(
                {"vec": vector(pk), "tag": "x"}).encode())  # fmt: skip
        p.flush(30)
        root = cluster_root(config.zookeeper, config.cluster.name)
        MappingStore(ZooKeeperKV(zk, root)).add(IngestMapping("watched", topic, "docs"))
        wait_for(lambda: len(proxy.rows) == 100, 20, "rows within 20 s of the mapping")
    finally:
        service.stop()
        zk.stop()
        zk.close()
