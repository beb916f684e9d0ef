"""A deterministic fault harness: every core of a cluster in one process, in milliseconds.

The coordinators (built by ``rootcoord.coordinators.build_coordinators``, as the coordinator
service builds them), query nodes, proxies and a data node run over the in-process channels
(``msgstream/memory.py``), the in-memory MetaKV and an in-memory object store, with a clock
the test moves. No thread runs unless a test starts one: time passes, ticks are written and
messages are delivered when the test says so (``advance``, ``tick``, ``pump``, ``step``).
One exception keeps reads natural: a query node about to wait for its tsafe calls
``settle`` (its subscriber's ``hurry``), which reports the proxies' promises, writes the
ticks and delivers them, unless ticks are paused. So a Strong read answers at once while the
cluster ticks and waits while a test holds the ticks back.

Faults a test can inject: ``pause_ticks``; ``drop_session`` (a proxy's ZooKeeper session
ends while its process lives on); the broker's channel faults (``broker.pause``/``drop``/
``duplicate``/``reorder``); and crashes: ``crash_coordinators``, ``crash_querynode`` and
``crash_proxy`` drop a role's core and build a new one from the KV and the channel positions,
as a restarted process would.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from vectide.services.common import timestamp
from vectide.services.common.config import Config
from vectide.services.common.index_spec import interim_index
from vectide.services.common.kv.memory import MemoryKV
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.memory import MemoryBroker, MemoryConsumer, MemoryProducer
from vectide.services.common.msgstream.message import (
    DataType,
    FieldColumn,
    Position,
    TimeTickMsg,
)
from vectide.services.common.schema import (
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.launcher import LocalNodes, LocalProxies
from vectide.services.proxy.context import ProxyConfig
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.dql import QuerySpec, SearchSpec
from vectide.services.proxy.imports import Importer
from vectide.services.querynode.core import QueryNode
from vectide.services.rootcoord.coordinators import Coordinators, build_coordinators
from vectide.streaming.flush import Record, process_batch

#: what each query node of a harness may hold (the balancer needs a limit)
QUERYNODE_MEMORY_MB = 1024.0
#: the vector field of ``Harness.create_collection``'s collections
VECTOR_FIELD = "vec"


class ManualClock:
    """Wall time that moves only when told (milliseconds since the epoch)."""

    def __init__(self, start_ms: int | None = None) -> None:
        self.ms = timestamp.now_ms() if start_ms is None else start_ms

    def now_ms(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


class MemoryObjectStore:
    """The object store on a dict (binlogs, deltalogs, index files).

    ``fail_index_puts`` makes that many writes of index files fail (S3 outage drills).
    """

    def __init__(self, fail_index_puts: int = 0, clock: Callable[[], float] | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail_index_puts = fail_index_puts
        self._written: dict[str, float] = {}
        self._clock = clock or (lambda: timestamp.now_ms() / 1000)

    def put(self, key: str, data: bytes) -> None:
        if key.startswith("index_files/") and self.fail_index_puts:
            self.fail_index_puts -= 1
            raise OSError("S3 is down")
        self.objects[key] = data
        self._written[key] = self._clock()

    def get(self, key: str) -> bytes:
        return self.objects[key]

    def size(self, key: str) -> int | None:
        data = self.objects.get(key)
        return None if data is None else len(data)

    def list(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))

    def list_ages(self, prefix: str = "") -> Iterator[tuple[str, float]]:
        now = self._clock()
        return iter([(k, now - self._written.get(k, now)) for k in self.list(prefix)])

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list(prefix)
        for key in keys:
            del self.objects[key]
        return len(keys)


class MemorySubscriber:
    """Feeds a QueryNode from the memory broker when the harness pumps (the calls of
    ``querynode.subscriber.KafkaSubscriber``, without its reader threads)."""

    def __init__(self, broker: MemoryBroker, node: QueryNode, on_hurry: Callable[[], None]) -> None:
        self._broker = broker
        self._node = node
        self._on_hurry = on_hurry
        self.readers: dict[str, MemoryConsumer] = {}
        self._lock = threading.RLock()
        self._closed_poison = 0

    def subscribe(self, vchannel: str, pchannel: str, start_offset: int) -> None:
        start = {pchannel: Position(pchannel, start_offset, 0)}
        with self._lock:
            self.readers[vchannel] = MemoryConsumer(self._broker, [pchannel], start)

    def unsubscribe(self, vchannel: str) -> None:
        with self._lock:
            reader = self.readers.pop(vchannel, None)
            if reader is not None:
                self._closed_poison += reader.poison_count

    def hurry(self, vchannel: str, fence: Position | None = None) -> None:
        """With a fence the read needs no TimeTick: apply it (delivering what was written);
        without one, tick as a deployment's rootcoord would at once."""
        if fence is None:
            self._on_hurry()
            return
        with self._lock:
            reader = self.readers.get(vchannel)
            if reader is not None:
                reader.fence(fence)
        self.pump()

    def pump(self) -> int:
        """Apply every pack the channels complete now; returns how many were applied."""
        applied = 0
        with self._lock:
            for vchannel, reader in list(self.readers.items()):
                for pack in reader.drain():
                    if vchannel in self.readers:  # a DDL in an earlier pack may unwatch it
                        self._node.apply(vchannel, pack)
                        applied += 1
        return applied

    def problems(self) -> dict[str, str]:
        return {}

    def undecodable(self) -> int:
        with self._lock:
            return self._closed_poison + sum(r.poison_count for r in self.readers.values())

    def close(self) -> None:
        for vchannel in list(self.readers):
            self.unsubscribe(vchannel)


class MemoryDataNode:
    """The Spark data node's persistence, run when told: per channel, the records from the
    datacoord's checkpoint up to the channel's last TimeTick are written with the data node's
    own ``streaming.flush.process_batch`` and reported with ``save_batch``, as one batch."""

    def __init__(self, broker: MemoryBroker, coordinators: Callable[[], Coordinators], store: Any):
        self._broker = broker
        self._coordinators = coordinators
        self._store = store
        self.batches = 0

    def flush_once(self) -> list[int]:
        """Persist what the ticks cover; returns the segments that became Flushed."""
        datacoord = self._coordinators().datacoord
        checkpoints = datacoord.checkpoints()
        records: list[Record] = []
        for channel in self._broker.channels():
            start = checkpoints[channel].offset if channel in checkpoints else 0
            records += self._covered(channel, start)
        if not records:
            return []
        report, _ = process_batch(records, self._store)
        self.batches += 1
        return datacoord.save_batch(report)

    def _covered(self, channel: str, start: int) -> list[Record]:
        raw = self._broker.records(channel)
        end = start
        for offset in range(start, len(raw)):
            try:
                if isinstance(codec.decode(raw[offset]), TimeTickMsg):
                    end = offset + 1
            except codec.DecodeError:
                continue
        return [Record(channel, offset, raw[offset]) for offset in range(start, end)]


class _Active:
    """The active instance of a role the harness may rebuild, as a cluster's clients reach
    whichever coordinator is active: every attribute is looked up at call time."""

    def __init__(self, current: Callable[[], Any]) -> None:
        self._current = current

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._current(), name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: getattr(self._current(), name)(*args, **kwargs)


def harness_config() -> Config:
    """Defaults for a harness: two channels, a cluster name of its own."""
    config = Config()
    config.cluster.name = "harness"
    config.cluster.dml_channels = 2
    return config


class Harness:
    """A whole cluster in one process; see the module docstring."""

    def __init__(
        self, config: Config | None = None, querynodes: int = 1, clock: ManualClock | None = None
    ) -> None:
        self.config = config or harness_config()
        self.clock = clock or ManualClock()
        self.kv = MemoryKV()
        self.broker = MemoryBroker()
        self.writer = MemoryProducer(self.broker)
        self.store = MemoryObjectStore(clock=lambda: self.clock.now_ms() / 1000)
        self.nodes = LocalNodes()
        self.local_proxies = LocalProxies()
        self.ticks_paused = False
        self.subscribers: dict[int, MemorySubscriber] = {}
        #: proxies whose sessions live (the rootcoord's view of ZooKeeper's sessions)
        self.live_proxies: set[int] = set()
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self.coordinators = self._start_coordinators()
        self.rootcoord = _Active(lambda: self.coordinators.rootcoord)
        self.querycoord = _Active(lambda: self.coordinators.querycoord)
        self.datacoord = _Active(lambda: self.coordinators.datacoord)
        self.datanode = MemoryDataNode(self.broker, lambda: self.coordinators, self.store)
        for _ in range(querynodes):
            self.add_querynode()
        self.proxy = self.add_proxy()

    # -- roles -------------------------------------------------------------------------------

    def _start_coordinators(self) -> Coordinators:
        cores = build_coordinators(
            self.config,
            self.kv,
            self.writer,
            self.nodes,
            self.store,
            self.local_proxies,
            clock_ms=self.clock.now_ms,
        )
        self.broker.ensure_topics(cores.rootcoord.pchannels)
        cores.start()
        cores.rootcoord.set_live_proxies(sorted(self.live_proxies))
        return cores

    def add_querynode(self, labels: dict[str, str] | None = None) -> QueryNode:
        """A new query node (a new session id, with ``labels``), given shards by the
        querycoord."""
        node = QueryNode(
            next(self._ids),
            chunk_rows=self.config.query.index_chunk_rows,
            binlogs=self.store,
            memory_limit_mb=QUERYNODE_MEMORY_MB,
            interim=interim_index(self.config.query),
        )
        subscriber = MemorySubscriber(self.broker, node, on_hurry=self.settle)
        node.set_subscriber(subscriber)
        node.set_peers(self.nodes)
        self.subscribers[node.node_id] = subscriber
        self.nodes.add(node, labels)
        self.coordinators.querycoord.rebalance(self.nodes.live_nodes())
        return node

    def add_proxy(self) -> Proxy:
        """A new proxy (a new session id) that has promised its first timetick."""
        proxy = Proxy(
            next(self._ids),
            self.rootcoord,  # type: ignore[arg-type]
            self.querycoord,  # type: ignore[arg-type]
            self.nodes,
            self.writer,
            self.coordinators.rootcoord.pchannels,
            ProxyConfig.from_config(self.config),
            datacoord=self.datacoord,  # type: ignore[arg-type]
        )
        proxy.importer = Importer(
            proxy, self.store, clock=lambda: self.clock.now_ms() / 1000, background=False
        )
        self.local_proxies.proxies.append(proxy)
        self.live_proxies.add(proxy.server_id)
        self.coordinators.rootcoord.set_live_proxies(sorted(self.live_proxies))
        proxy.report_timetick()
        return proxy

    def proxies(self) -> list[Proxy]:
        return [p for p in self.local_proxies.proxies if p.server_id in self.live_proxies]

    # -- time and delivery -------------------------------------------------------------------

    def tick(self) -> dict[str, int]:
        """Live proxies report, the rootcoord writes the ticks that became safe, and every
        query node takes what they complete. Nothing is ticked while ticks are paused."""
        with self._lock:
            ticks: dict[str, int] = {}
            if not self.ticks_paused:
                for proxy in self.proxies():
                    proxy.report_timetick()
                ticks = self.coordinators.rootcoord.broadcast_ticks()
            self.pump()
            return ticks

    settle = tick

    def pump(self) -> int:
        """Deliver everything the channels hold to every query node; packs applied."""
        with self._lock:
            total = 0
            while applied := sum(s.pump() for s in list(self.subscribers.values())):
                total += applied
            return total

    def advance(self, ms: int) -> None:
        """Let ``ms`` of wall time pass: the TSO follows, then a tick."""
        self.clock.advance(ms)
        self.coordinators.rootcoord.update_tso()
        self.tick()

    def step(self, ms: int = 1000) -> int:
        """One round of every periodic loop after ``ms``: the TSO, ticks, idle sealing, a
        data-node batch, the handoff. Returns how many segments were handed off."""
        self.advance(ms)
        cores = self.coordinators
        cores.datacoord.seal_idle()
        self.tick()  # past every seal stamp: the batch can complete what was just sealed
        self.datanode.flush_once()
        handed = cores.querycoord.handoff()
        self.pump()
        return handed

    def pause_ticks(self) -> None:
        self.ticks_paused = True

    def resume_ticks(self) -> None:
        self.ticks_paused = False

    # -- faults ------------------------------------------------------------------------------

    def drop_session(self, proxy: Proxy) -> None:
        """The proxy's session ends (ZooKeeper expired it) while the proxy lives on: the
        rootcoord no longer waits for its promises."""
        self.live_proxies.discard(proxy.server_id)
        self.coordinators.rootcoord.set_live_proxies(sorted(self.live_proxies))

    def crash_coordinators(self) -> Coordinators:
        """The coordinator process dies; a new one takes over from the KV (TSO above every
        stamp handed out, catalog, segments, shard assignments)."""
        self.coordinators.rootcoord.tso.fence()
        self.coordinators = self._start_coordinators()
        return self.coordinators

    def crash_querynode(self, node_id: int) -> QueryNode:
        """A query node dies; a new one (new session) joins, and the querycoord gives it the
        shards, which it loads from the persisted segments and the channel positions."""
        self.nodes.remove(node_id)
        self.subscribers.pop(node_id).close()
        self.coordinators.querycoord.rebalance(self.nodes.live_nodes())
        return self.add_querynode()

    def crash_proxy(self, proxy: Proxy) -> Proxy:
        """A proxy dies (its session ends with it); a new one starts."""
        self.drop_session(proxy)
        self.local_proxies.proxies.remove(proxy)
        replacement = self.add_proxy()
        if self.proxy is proxy:
            self.proxy = replacement
        return replacement

    # -- a collection and its rows, for tests --------------------------------------------------

    def create_collection(
        self,
        name: str,
        dim: int = 4,
        shards: int = 1,
        level: ConsistencyLevel = ConsistencyLevel.STRONG,
    ) -> int:
        """An int64-keyed collection with a FLAT L2 index on ``vec``, loaded; its id."""
        schema = CollectionSchema(
            name,
            [
                FieldSchema(100, "id", DataType.INT64, is_primary=True),
                FieldSchema(101, VECTOR_FIELD, DataType.FLOAT_VECTOR, dim=dim),
            ],
        )
        info = self.proxy.create_collection(schema, shards, level, {}, b"")
        self.proxy.create_index(name, VECTOR_FIELD, "idx", {"index_type": "FLAT"})
        self.proxy.load_collection(name)
        self.tick()
        return info.collection_id

    def insert(self, name: str, pks: Sequence[int], proxy: Proxy | None = None) -> int:
        """Insert rows whose vectors are their keys in every dimension; the write's stamp."""
        proxy = proxy or self.proxy
        info = proxy.meta.get(name)
        field = info.schema.field(VECTOR_FIELD)
        assert field is not None
        keys = np.asarray(pks, dtype=np.int64)
        vectors = np.repeat(keys.astype(np.float32)[:, None], field.dim, axis=1)
        columns = {
            "id": FieldColumn(100, "id", DataType.INT64, keys),
            VECTOR_FIELD: FieldColumn(101, VECTOR_FIELD, DataType.FLOAT_VECTOR, vectors, field.dim),
        }
        return proxy.insert(name, "", columns, len(keys)).ts

    def delete(self, name: str, pks: Sequence[int]) -> int:
        return self.proxy.delete_pks(name, "", np.asarray(pks, dtype=np.int64)).ts

    def query_ids(
        self,
        name: str,
        level: ConsistencyLevel = ConsistencyLevel.STRONG,
        deadline_s: float | None = None,
        guarantee_ts: int = 0,
    ) -> list[int]:
        """Every key a read at ``level`` sees, sorted."""
        spec = QuerySpec(
            collection_name=name,
            expr="id >= 0",
            use_default_consistency=False,
            consistency_level=level,
            deadline_s=deadline_s,
            guarantee_ts=guarantee_ts,
        )
        return sorted(int(pk) for pk in self.proxy.query(spec)[1].pks)

    def search_ids(self, name: str, key: int, limit: int = 10) -> list[int]:
        """The keys nearest to ``key``'s vector (Strong)."""
        field = self.proxy.meta.get(name).schema.field(VECTOR_FIELD)
        assert field is not None
        spec = SearchSpec(
            collection_name=name,
            use_default_consistency=False,
            consistency_level=ConsistencyLevel.STRONG,
            vectors=np.full((1, field.dim), key, np.float32),
            anns_field=VECTOR_FIELD,
            metric_type="L2",
            limit=limit,
        )
        return [int(pk) for pk in self.proxy.search(spec)[1].pks]
