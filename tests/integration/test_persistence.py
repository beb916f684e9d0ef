"""Persistence with the real Spark data node: binlogs on S3, flush, crash recovery, handoff,
and serving persisted segments after a restart."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.grpc_gen import common_pb2

from tests.integration.conftest import exact_groups, free_port, isolated, query_segments_when
from vectide.services.common import binlog
from vectide.services.common.kv.zookeeper import cluster_root, connect_zookeeper
from vectide.services.common.objectstore import ObjectStore
from vectide.services.common.session import SessionRegistry
from vectide.services.infra.process import ManagedProcess
from vectide.services.launcher import start_standalone
from vectide.streaming.flush import PK_FIELD, TS_FIELD

#: minutes, real processes killed: `make test-heavy` runs these alone
pytestmark = pytest.mark.heavy

DIM = 16


class DataNode:
    """The data node as a user runs it: `vectide run datanode`, its own process."""

    def __init__(self, config) -> None:
        self.config = config
        self.proc = ManagedProcess(
            f"datanode-{config.cluster.name}", config.run_dir, "vectide.services.cli run datanode"
        )

    def start(self) -> None:
        """Start it and wait until its streaming query runs (its session is registered)."""
        # its own /metrics port: the standalone deployment in this process holds the config's
        argv = [sys.executable, "-m", "vectide.services.cli", "run", "datanode"]
        argv += ["--metrics-port", str(free_port())]
        before = set(self._members())
        self.proc.start(argv, env={**os.environ, **self.config.to_env()})
        deadline = time.monotonic() + 120
        while not set(self._members()) - before:
            assert time.monotonic() < deadline, self.proc.log_tail()
            assert not self.proc.exited_early(), self.proc.log_tail()
            time.sleep(0.5)

    def _members(self) -> list[int]:
        client = connect_zookeeper(self.config.zookeeper)
        try:
            root = cluster_root(self.config.zookeeper, self.config.cluster.name)
            return list(SessionRegistry(client, root).members("datanode"))
        finally:
            client.stop()
            client.close()

    def kill(self) -> None:
        pid = self.proc.pid()
        os.killpg(pid, signal.SIGKILL)  # driver and Spark JVM alike
        while self.proc.pid() is not None:
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.stop(timeout_s=30)


class Persistent:
    """A standalone deployment (in this process) plus a data node process, restartable."""

    def __init__(self, config) -> None:
        self.config = config
        self.port = free_port()
        self.datanode = DataNode(config)
        self.deployment = None
        self.client = None

    def start(self) -> None:
        self.deployment = start_standalone(
            self.config, proxy_port=self.port, coordinator_port=self.config.service.rootcoord_port
        )
        self.client = MilvusClient(f"http://127.0.0.1:{self.port}")

    @contextmanager
    def running(self) -> Iterator[Persistent]:
        """The deployment and its data node, both stopped at the end."""
        self.start()
        try:
            self.datanode.start()
            yield self
        finally:
            self.stop()
            self.datanode.stop()

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.deployment is not None:
            self.deployment.stop()
        self.deployment = self.client = None


@pytest.fixture(scope="module")
def persistent(infra):
    config = isolated(infra, "p")
    config.data.segment_max_rows = 100_000
    config.data.trigger_s = 1.0
    config.service.rootcoord_port = free_port()
    with Persistent(config).running() as holder:
        yield holder


def make_collection(client: MilvusClient) -> str:
    name = f"p_{uuid.uuid4().hex[:6]}"
    create_with_scalars(client, name, {})  # FLAT: exact, no index builds
    return name


def create_with_scalars(
    client: MilvusClient,
    name: str,
    fields: dict[str, tuple[DataType, dict]],
    scalar_indexes: dict[str, str] | None = None,
) -> None:
    """An int64 key, a FLAT vector (exact) and ``fields``, with ``scalar_indexes`` on them."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    for field, (data_type, options) in fields.items():
        schema.add_field(field, data_type, **options)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    for field, index_type in (scalar_indexes or {}).items():
        index.add_index(field, index_type=index_type)
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")


def insert_range(client, name, start, count, batch=10_000):
    rng = np.random.default_rng(start)
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    for b in range(0, count, batch):
        client.insert(
            name,
            [{"id": start + b + i, "vec": vectors[b + i]} for i in range(min(batch, count - b))],
        )
    return vectors


def persisted_rows(config, collection_id: int) -> tuple[dict[int, bytes], int]:
    """Every row in the collection's binlogs on S3: pk -> vector bytes, and the row count."""
    store = ObjectStore(config.s3)
    keys = [k for k in store.list(f"insert_log/{collection_id}/") if f"/{PK_FIELD}/" in k]
    rows: dict[int, bytes] = {}
    total = 0
    for key in keys:
        prefix, log_id = key.rsplit(f"/{PK_FIELD}/", 1)
        pks = binlog.decode_column(store.get(key), DataType.INT64)
        vec_key = next(
            k
            for k in store.list(prefix + "/")
            if k.endswith("/" + log_id) and f"/{PK_FIELD}/" not in k and f"/{TS_FIELD}/" not in k
        )
        vectors = binlog.decode_column(store.get(vec_key), DataType.FLOAT_VECTOR, DIM)
        total += len(pks)
        for pk, vec in zip(pks.tolist(), vectors, strict=True):
            rows[pk] = vec.tobytes()
    return rows, total


def test_flush_writes_exactly_the_inserted_rows_and_deletes(persistent):
    client, config = persistent.client, persistent.config
    name = make_collection(client)
    vectors = insert_range(client, name, 0, 200_000)
    deleted = list(range(0, 2_000, 7))
    client.delete(name, ids=deleted)
    started = time.monotonic()
    client.flush(name)  # pymilvus waits until GetFlushState is true
    print(f"flush of 200k rows took {time.monotonic() - started:.1f}s")
    collection_id = client.describe_collection(name)["collection_id"]
    rows, total = persisted_rows(config, collection_id)
    assert total == 200_000 and len(rows) == 200_000
    assert all(rows[i] == vectors[i].tobytes() for i in range(0, 200_000, 997))
    store = ObjectStore(config.s3)
    delta_pks = []
    for key in store.list(f"delta_log/{collection_id}/"):
        delta_pks += binlog.decode_deltas(store.get(key))[0].tolist()
    assert sorted(delta_pks) == deleted
    count = client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
    assert count == 200_000 - len(deleted)


def test_killed_data_node_resumes_without_losing_or_duplicating(persistent):
    client, config, datanode = persistent.client, persistent.config, persistent.datanode
    name = make_collection(client)
    writer = threading.Thread(target=insert_range, args=(client, name, 0, 60_000, 2_000))
    writer.start()
    time.sleep(4)
    datanode.kill()  # mid-stream: batches in flight die with it
    writer.join()
    datanode.start()  # same Spark checkpoint: the last batch is replayed
    client.flush(name)
    collection_id = client.describe_collection(name)["collection_id"]
    rows, total = persisted_rows(config, collection_id)
    assert total == 60_000, "a replayed batch left duplicates behind"
    assert sorted(rows) == list(range(60_000))


def wait_for_handoff(port: int, name: str, rows: int = 1, timeout_s: float = 60) -> int:
    """Wait until the query nodes serve at least ``rows`` rows of ``name`` from flushed
    segments; returns the rows they serve so, when it gives up too."""

    def flushed_rows(infos: list) -> int:
        return sum(i.num_rows for i in infos if i.state == common_pb2.SegmentState.Flushed)

    infos = query_segments_when(port, name, lambda i: flushed_rows(i) >= rows, timeout_s)
    return flushed_rows(infos)


def test_strong_reads_stay_exact_through_flush_and_handoff(persistent):
    client = persistent.client
    name = make_collection(client)
    insert_range(client, name, 0, 30_000)
    problems: list[object] = []
    rounds = [0]
    stop = threading.Event()
    probe = np.zeros(DIM, np.float32).tolist()

    def reader() -> None:
        while not stop.is_set():
            count = client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
            if count != 30_000:
                problems.append(("count", count))
            ids = [h["id"] for h in client.search(name, [probe], limit=100)[0]]
            if len(ids) != 100 or len(set(ids)) != 100:
                problems.append(("search", ids))
            rounds[0] += 1

    thread = threading.Thread(target=reader)
    thread.start()
    client.flush(name)
    try:
        handed_off = wait_for_handoff(persistent.port, name, rows=30_000)
        at_handoff = rounds[0]
        deadline = time.monotonic() + 30
        while rounds[0] < at_handoff + 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # reads go on against the sealed copy
    finally:
        stop.set()
        thread.join()
    assert handed_off == 30_000, "the query node did not serve the flushed segments"
    assert rounds[0] >= at_handoff + 3 and problems == []
    got = client.query(name, filter="id >= 0", output_fields=["id"])
    assert sorted(r["id"] for r in got) == list(range(30_000))


def test_grouping_search_is_exact_over_sealed_and_growing_rows(persistent):
    """Groups whose rows sit in flushed segments (served from S3) and in growing ones."""
    client = persistent.client
    name = f"pg_{uuid.uuid4().hex[:6]}"
    create_with_scalars(client, name, {"g": (DataType.INT64, {})})
    rng = np.random.default_rng(4)
    rows = [
        {"id": i, "vec": rng.standard_normal(DIM).tolist(), "g": int(rng.integers(0, 9))}
        for i in range(4_000)
    ]
    client.insert(name, rows[:3_000])
    client.flush(name)
    client.insert(name, rows[3_000:])  # growing, beside the sealed segments
    assert wait_for_handoff(persistent.port, name) > 0, "no flushed segment was handed off"
    queries = rng.standard_normal((2, DIM)).tolist()
    hits = client.search(name, queries, limit=4, group_by_field="g", group_size=3)
    labelled = [{**r, "by": r["g"]} for r in rows]
    for got, query in zip(hits, queries, strict=True):
        expected = exact_groups(labelled, np.array(query), "vec", "L2", 4, 3, 0, lambda r: True)
        assert [h["id"] for h in got] == [i for i, _ in expected]
    client.drop_collection(name)


@pytest.mark.parametrize(
    ("index_type", "params", "search"),
    [
        ("HNSW", {"M": 16, "efConstruction": 200}, {"ef": 64}),
        ("IVF_FLAT", {"nlist": 64}, {"nprobe": 32}),
    ],
)
def test_index_files_on_sealed_segments_reach_the_recall_target(
    persistent, index_type, params, search
):
    client = persistent.client
    name = f"idx_{uuid.uuid4().hex[:6]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    index = client.prepare_index_params()
    index.add_index("vec", index_type=index_type, metric_type="L2", params=params)
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    vectors = insert_range(client, name, 0, 40_000)
    client.flush(name)
    deadline = time.monotonic() + 120
    while True:  # the index node writes one index file per flushed segment
        described = client.describe_index(name, "vec")
        if described["indexed_rows"] == 40_000 and described["pending_index_rows"] == 0:
            break
        assert time.monotonic() < deadline, described
        time.sleep(0.5)
    assert described["state"] == "Finished"
    persistent.stop()  # reload: the query node takes the index files from S3
    persistent.start()
    client = persistent.client
    queries = np.random.default_rng(99).standard_normal((100, DIM)).astype(np.float32)
    results = client.search(name, queries.tolist(), limit=10, search_params={"params": search})
    truth = np.argsort(((queries[:, None, :] - vectors[None]) ** 2).sum(-1), axis=1)[:, :10]
    recall = np.mean(
        [
            len({h["id"] for h in hits} & set(t.tolist())) / 10
            for hits, t in zip(results, truth, strict=True)
        ]
    )
    print(f"{index_type} recall@10 = {recall:.3f}")
    assert recall >= 0.95
    # the sealed segment reads its vectors from the index (no column of its own): exact
    rows = client.query(name, filter="id in [0, 7, 39999]", output_fields=["vec"])
    got = {r["id"]: np.asarray(r["vec"], np.float32) for r in rows}
    for i in (0, 7, 39999):
        np.testing.assert_array_equal(got[i], vectors[i])


def test_a_restarted_deployment_serves_flushed_data_from_s3(persistent):
    client = persistent.client
    name = make_collection(client)
    vectors = insert_range(client, name, 0, 20_000)
    client.delete(name, ids=[5, 6])
    client.flush(name)
    client.insert(name, [{"id": 50_000, "vec": vectors[0]}])  # growing only, in the log
    persistent.stop()  # every Vectide process of the deployment goes away
    persistent.start()  # new coordinators and query node: segments come back from S3
    client = persistent.client
    count = client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
    assert count == 20_000 - 2 + 1
    hits = client.search(name, [vectors[100].tolist()], limit=1)[0]
    assert hits[0]["id"] == 100


def test_scalar_index_filters_stay_exact_through_flush_handoff_and_reload(persistent):
    """Scalar indexes over growing chunks, then over the flushed segments the query node
    loads at handoff, then after a release and load from S3: the same rows every time, and
    the indexes answer (the filtered-read counter's index path moves)."""
    from vectide.services.common import metrics

    client = persistent.client
    name = f"ps_{uuid.uuid4().hex[:6]}"
    fields = {"age": (DataType.INT64, {}), "name": (DataType.VARCHAR, {"max_length": 12})}
    create_with_scalars(client, name, fields, {"age": "STL_SORT", "name": "TRIE"})
    rows = [
        {"id": i, "vec": [float(i % 7)] * DIM, "age": (i * 37) % 1000, "name": f"n{i % 500}"}
        for i in range(40_000)
    ]
    for start in range(0, len(rows), 10_000):
        client.insert(name, rows[start : start + 10_000])
    client.delete(name, ids=list(range(0, 40_000, 11)))
    live = [r for r in rows if r["id"] % 11]
    cases = {
        "age == 7": lambda r: r["age"] == 7,
        'name like "n12%"': lambda r: r["name"].startswith("n12"),
        'age < 30 and name in ["n1", "n2", "n3"]': lambda r: (
            r["age"] < 30 and r["name"] in ("n1", "n2", "n3")
        ),
    }

    def check(stage: str) -> None:
        before = metrics.FILTERED_READS.labels("index")._value.get()
        for expr, keep in cases.items():
            got = client.query(name, filter=expr, output_fields=["id"], limit=16_384)
            assert sorted(r["id"] for r in got) == [r["id"] for r in live if keep(r)], stage
        assert metrics.FILTERED_READS.labels("index")._value.get() > before, stage

    time.sleep(1.5)  # the growing chunks' indexes are built every half second
    check("growing")
    client.flush(name)
    deadline = time.monotonic() + 60
    while {s.state for s in client._get_connection().get_query_segment_info(name)} != {
        common_pb2.SegmentState.Flushed
    }:
        assert time.monotonic() < deadline, "the flushed segments were not handed off"
        time.sleep(0.5)
    check("after handoff")
    client.release_collection(name)
    client.load_collection(name)
    check("loaded from S3")
    client.drop_collection(name)


def test_geometry_rows_and_their_rtree_filters_survive_flush_handoff_and_reload(persistent):
    """GEOMETRY (Milvus 2.6.4) through pymilvus: WKT in, normalized WKT out, ST_* filters
    answered as GEOS answers them (the oracle: shapely over the same rows) over growing rows,
    the Spark data node's flushed binlogs after handoff and a reload from S3, through an
    RTREE index; and the same rows and a filter through the RESTful API."""
    import shapely

    client = persistent.client
    name = f"pg_{uuid.uuid4().hex[:6]}"
    create_with_scalars(client, name, {"geo": (DataType.GEOMETRY, {"nullable": True})})
    rng = np.random.default_rng(3)
    shapes: dict[int, str | None] = {}
    for i in range(3_000):
        x, y = rng.uniform(-60, 60, 2)
        if i % 10 == 9:
            shapes[i] = None
        elif i % 3:
            shapes[i] = f"POINT({x:.5f}  {y:.5f})"  # spacing the server normalizes
        else:
            shapes[i] = shapely.box(x, y, x + rng.uniform(0.5, 5), y + rng.uniform(0.5, 5)).wkt
    rows = [{"id": i, "vec": [float(i % 5)] * DIM, "geo": w} for i, w in shapes.items()]
    for start in range(0, len(rows), 1_000):
        client.insert(name, rows[start : start + 1_000])
    region = "POLYGON ((-20 -20, 25 -20, 25 30, -20 30, -20 -20))"
    geoms = {i: None if w is None else shapely.from_wkt(w) for i, w in shapes.items()}
    q_region, origin = shapely.from_wkt(region), shapely.Point(10, 10)
    expected = {
        f"ST_WITHIN(geo, '{region}')": [i for i, g in geoms.items() if g and g.within(q_region)],
        f"ST_INTERSECTS(geo, '{region}') and id < 2000": [
            i for i, g in geoms.items() if g and i < 2000 and g.intersects(q_region)
        ],
        "ST_DWITHIN(geo, 'POINT (10 10)', 700000)": [
            i for i, g in geoms.items() if g is not None and _within_m(g, origin, 700_000)
        ],
        "geo is null": [i for i, g in geoms.items() if g is None],
    }
    assert all(expected.values())

    def check(stage: str, indexed: bool) -> None:
        _assert_filters(client, name, expected, stage, indexed)
        [row] = client.query(name, filter="id == 1", output_fields=["geo"])
        assert row["geo"] == shapely.to_wkt(geoms[1], rounding_precision=-1), stage
        assert client.query(name, filter="id == 9", output_fields=["geo"])[0]["geo"] is None

    check("growing", indexed=False)
    _reload_indexed(client, name, "geo", "RTREE", "geo_tree")
    check("loaded from S3 with RTREE", indexed=True)
    assert client.describe_index(name, "geo_tree")["index_type"] == "RTREE"

    _rest_round_trip(
        persistent, name, "geo", ("POINT(1 2)", "POINT (1 2)"), "ST_EQUALS(geo, 'POINT (1 2)')"
    )
    _rest_refuses(persistent, name, "geo", "POINT(1)", "invalid WKT")
    client.drop_collection(name)


def test_timestamptz_rows_zones_and_filters_survive_flush_and_reload(persistent):
    """TIMESTAMPTZ (Milvus 2.6.6) through pymilvus: ISO text with offsets and without (the
    collection's zone, Asia/Shanghai), instants back as text in the collection's or the
    request's zone and as ``time_fields``; ISO and INTERVAL filters against Python's own
    datetime arithmetic over growing rows, then the Spark data node's binlogs loaded from S3
    through an STL_SORT index; ISO text through the RESTful API and a bad one refused."""
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    client = persistent.client
    name = f"pt_{uuid.uuid4().hex[:6]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("tsz", DataType.TIMESTAMPTZ, nullable=True)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(
        name,
        schema=schema,
        index_params=index,
        consistency_level="Strong",
        properties={"timezone": "Asia/Shanghai"},
    )
    shanghai, new_york = ZoneInfo("Asia/Shanghai"), ZoneInfo("America/New_York")
    start = datetime(2024, 12, 1, tzinfo=UTC)
    instants: dict[int, datetime | None] = {}
    texts: dict[int, str | None] = {}
    for i in range(3_000):
        moment = start + timedelta(hours=7 * i, microseconds=i)
        instants[i] = None if i % 10 == 9 else moment
        if i % 10 == 9:
            texts[i] = None
        elif i % 3 == 0:  # no offset: the collection's zone
            texts[i] = moment.astimezone(shanghai).replace(tzinfo=None).isoformat(sep=" ")
        else:
            texts[i] = moment.astimezone(new_york if i % 3 == 1 else UTC).isoformat()
    rows = [{"id": i, "vec": [float(i % 5)] * DIM, "tsz": t} for i, t in texts.items()]
    for begin in range(0, len(rows), 1_000):
        client.insert(name, rows[begin : begin + 1_000])
    january = datetime(2025, 1, 1, tzinfo=shanghai)

    def kept(test) -> list[int]:
        return [i for i, t in instants.items() if t is not None and test(t)]

    expected = {
        "tsz >= ISO '2025-01-01 00:00:00' and tsz < ISO '2025-01-02T00:00:00+08:00'": kept(
            lambda t: january <= t < january + timedelta(days=1)
        ),
        "ISO '2024-12-02T00:00:00Z' > tsz": kept(lambda t: t < start + timedelta(days=1)),
        "tsz - INTERVAL 'PT12H' == ISO '" + texts[300] + "'": [],  # 12 h earlier: no row
        "tsz + INTERVAL 'P1DT12H' <= ISO '2024-12-03 08:00:00'": kept(
            lambda t: t + timedelta(days=1, hours=12) <= datetime(2024, 12, 3, tzinfo=UTC)
        ),
        "tsz is null and id < 100": [i for i in range(9, 100, 10)],
    }
    assert all(expected[e] for e in expected if "INTERVAL 'PT12H'" not in e)

    def check(stage: str, indexed: bool) -> None:
        _assert_filters(client, name, expected, stage, indexed)
        [row] = client.query(name, filter="id == 1", output_fields=["tsz"])
        assert row["tsz"] == "2024-12-01T15:00:00.000001+08:00", stage
        [row] = client.query(name, filter="id == 1", output_fields=["tsz"], timezone="UTC")
        assert row["tsz"] == "2024-12-01T07:00:00.000001Z", stage
        [row] = client.query(
            name, filter="id == 4", output_fields=["tsz"], time_fields="year, month, day, hour"
        )
        assert row["tsz"] == [2024, 12, 2, 12], stage  # 04:00 UTC: noon in Shanghai
        [row] = client.query(name, filter="id == 9", output_fields=["tsz"])
        assert row["tsz"] is None, stage

    check("growing", indexed=False)
    _reload_indexed(client, name, "tsz", "STL_SORT", "tsz_sort")
    check("loaded from S3 with STL_SORT", indexed=True)

    written = ("2030-06-01T12:00:00Z", "2030-06-01T20:00:00+08:00")  # read in Shanghai's zone
    _rest_round_trip(persistent, name, "tsz", written, "tsz > ISO '2030-01-01T00:00:00Z'")
    _rest_refuses(persistent, name, "tsz", "soon", "invalid timestamp string")
    client.drop_collection(name)


def _reload_indexed(
    client: MilvusClient, name: str, field: str, index_type: str, index_name: str
) -> None:
    """Flush, release, index ``field`` and load: reads then come from the Spark data node's
    binlogs on S3, through the new scalar index."""
    client.flush(name)
    client.release_collection(name)
    index = client.prepare_index_params()
    index.add_index(field, index_type=index_type, index_name=index_name)
    client.create_index(name, index)
    client.load_collection(name)


def _assert_filters(
    client: MilvusClient, name: str, expected: dict[str, list[int]], stage: str, indexed: bool
) -> None:
    """Each filter finds exactly its keys; ``indexed``: scalar indexes served some of them
    (the filtered-read counter's index path moved)."""
    from vectide.services.common import metrics

    before = metrics.FILTERED_READS.labels("index")._value.get()
    for expr, keys in expected.items():
        got = client.query(name, filter=expr, output_fields=["id"], limit=16_384)
        assert sorted(r["id"] for r in got) == keys, (stage, expr)
    if indexed:
        assert metrics.FILTERED_READS.labels("index")._value.get() > before, stage


def _rest_round_trip(
    persistent, name: str, field: str, written: tuple[str, str], filter_: str
) -> None:
    """A row whose ``field`` is ``written[0]`` inserted through REST v2, then the only row
    ``filter_`` finds there, read back as ``written[1]``."""
    import requests

    base = f"http://127.0.0.1:{persistent.config.service.http_port}/v2/vectordb"
    row = {"id": 90_000, "vec": [0.5] * DIM, field: written[0]}
    body = {"collectionName": name, "data": [row]}
    assert requests.post(f"{base}/entities/insert", json=body, timeout=30).json()["code"] == 0
    query = {"collectionName": name, "filter": filter_, "outputFields": [field]}
    reply = requests.post(f"{base}/entities/query", json=query, timeout=30).json()
    assert reply["code"] == 0 and reply["data"] == [{"id": 90_000, field: written[1]}], reply


def _rest_refuses(persistent, name: str, field: str, value: str, reason: str) -> None:
    """A REST v2 insert of a ``field`` value the field cannot hold: 1100, naming ``reason``."""
    import requests

    base = f"http://127.0.0.1:{persistent.config.service.http_port}/v2/vectordb"
    body = {"collectionName": name, "data": [{"id": 90_001, "vec": [0.5] * DIM, field: value}]}
    refused = requests.post(f"{base}/entities/insert", json=body, timeout=30).json()
    assert refused["code"] == 1100 and reason in refused["message"], refused


def _within_m(g, point, meters: float) -> bool:
    """ST_DWITHIN as Milvus measures it (services/common/geometry.py has the why)."""
    from vectide.services.common import geometry

    rows = np.empty(1, dtype=object)
    rows[0] = g
    return bool(geometry.dwithin(rows, point, meters)[0])


def test_nullable_vectors_survive_flush_index_and_reload(persistent):
    """A nullable vector field (Milvus 2.6) through pymilvus: rows without a vector are never
    searched and come back as None, over growing rows and then over the Spark data node's
    binlogs loaded from S3 with an HNSW index file built over the rows that have one."""
    client = persistent.client
    name = f"nv_{uuid.uuid4().hex[:6]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("extra", DataType.FLOAT_VECTOR, dim=DIM, nullable=True)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    index.add_index("extra", index_type="HNSW", metric_type="L2", params={"M": 8})
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rng = np.random.default_rng(11)
    extra = rng.random((2000, DIM)).astype(np.float32)
    held = np.arange(2000) % 4 != 0  # every fourth row has no vector
    rows = [
        {"id": i, "vec": [float(i)] * DIM, **({"extra": extra[i].tolist()} if held[i] else {})}
        for i in range(2000)
    ]
    client.insert(name, rows)

    def check(stage: str) -> None:
        hits = client.search(name, [extra[5].tolist()], anns_field="extra", limit=40)[0]
        found = [h["id"] for h in hits]
        assert found[0] == 5 and all(held[k] for k in found), stage
        distances = ((extra[held] - extra[5]) ** 2).sum(axis=1)
        exact = np.flatnonzero(held)[np.argsort(distances)[:40]]
        assert len(set(found) & set(exact.tolist())) >= 36, stage
        got = client.query(name, filter="id in [4, 5]", output_fields=["extra"])
        by_id = {r["id"]: r["extra"] for r in got}
        assert by_id[4] is None, stage
        np.testing.assert_allclose(by_id[5], extra[5], rtol=1e-6)
        assert (
            client.query(name, filter="id >= 0", output_fields=["count(*)"])[0]["count(*)"] == 2000
        )

    check("growing")
    client.flush(name)
    client.release_collection(name)
    client.load_collection(name)
    check("sealed, from S3")
    # a second embedding joins the collection: older rows have none
    client.add_collection_field(name, "later", DataType.FLOAT_VECTOR, dim=DIM, nullable=True)
    client.insert(
        name, [{"id": 5000 + i, "vec": [0.0] * DIM, "later": extra[i].tolist()} for i in range(30)]
    )

    def later(stage: str) -> None:
        hits = client.search(name, [extra[2].tolist()], anns_field="later", limit=100)[0]
        assert hits[0]["id"] == 5002 and {h["id"] for h in hits} == set(range(5000, 5030)), stage

    later("exact")
    client.flush(name)
    client.release_collection(name)
    index = client.prepare_index_params()
    index.add_index("later", index_type="HNSW", metric_type="L2")
    client.create_index(name, index)
    client.load_collection(name)
    later("through an index file over the rows that have one")
    client.drop_collection(name)
