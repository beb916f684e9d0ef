"""A Spark streaming source over Vectide's channels whose executor tasks persist them.

Spark's own Kafka source needs jars that cannot be fetched here, so this is a Python
``DataSource``. Offsets are ``{channel: next offset}``; Spark's checkpoint holds them, so a
restarted job resumes exactly where its last committed batch ended.

The work is split the way Spark scales:

- on the driver, ``latestOffset`` reads the channels forward from where it last stopped (one
  long-lived consumer that keeps fetching with a long fetch wait) and lets the pure
  ``OffsetPlanner`` cut the batch; watermarks are never trusted (Tansu's lag the true end);
- on the executors, ``read(partition)`` takes one channel's ``[start, end)``, decodes it,
  writes the binlogs, deltalogs and stats to S3 (``flush.process_batch``) and yields only a
  few small rows describing what it wrote (``report_rows``). The driver gathers those and
  reports them to datacoord. A replayed batch re-reads the same offsets, so it overwrites the
  same objects under the same names: exactly-once on top of at-least-once.

Executors keep one consumer per channel in their Python worker (``spark.python.worker.reuse``),
unassigned between batches so an idle data node does not poll the broker; records a read
fetched past its range's end are kept for the next range of that channel.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from vectide.services.common.msgstream.tick_index import decode_entry
from vectide.streaming.planning import OffsetPlanner, PlanLimits, Seen

log = logging.getLogger(__name__)

#: the Avro union branch of a TimeTick (zig-zag varint 2): a tick is known by its first byte
TICK_PREFIX = b"\x04"
#: what an executor task returns per channel range (see ``flush.report_rows``)
SCHEMA = "kind string, body string"
#: offsets of one channel one executor task takes: a batch's range is split into tasks of
#: this many so that several executors share one busy channel (a collection with one shard
#: writes to one channel). A constant, not a setting: a replayed batch must be split as its
#: first run was, or it would write its rows under other names a second time.
TASK_RECORDS = 64


def consumer_conf(
    bootstrap: str, fetch_wait_ms: int, security: dict[str, str] | None = None
) -> dict[str, Any]:
    """An ``assign()``-only consumer: the group id is required by the client, never joined.
    ``security``: the ``kafka.security_protocol``/``sasl_*``/``ssl_*`` settings, which reach
    executors as a reader option."""
    return {
        **(security or {}),
        "bootstrap.servers": bootstrap,
        "group.id": "vectide-datanode",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": fetch_wait_ms,
        # insert messages run to 4 MiB: fetch many per round trip, not one
        "max.partition.fetch.bytes": 64 * 1024 * 1024,
        "fetch.max.bytes": 128 * 1024 * 1024,
        "queued.max.messages.kbytes": 256 * 1024,
        "enable.partition.eof": False,
    }


def tick_ts(value: bytes) -> int | None:
    """The stamp of a TimeTick record, None for any other record."""
    if value[:1] != TICK_PREFIX:
        return None
    from vectide.services.common.msgstream import codec

    try:
        return codec.decode(value).ts
    except codec.DecodeError:
        return None


def read_flush_wanted(path: str) -> int:
    """The newest seal stamp a flush waits for (written by the data node's ``FlushWake``)."""
    if not path:
        return 0
    try:
        with open(path) as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


# -- executor side --------------------------------------------------------------------------


#: a read that got no record for this long while its range holds more fetches more patiently
STALL_S = 1.0
#: the longest fetch wait a stalled read goes up to
MAX_FETCH_WAIT_MS = 1000


@dataclass
class CachedChannel:
    """An executor's consumer of one channel, kept across batches in its Python worker."""

    consumer: Any
    #: the offset the consumer delivers next (after ``leftover``)
    next_offset: int = -1
    #: records it delivered past the last range's end, for the next range
    leftover: list[tuple[int, bytes]] = field(default_factory=list)
    #: the consumer's fetch wait, and how to make one with another wait (None: never)
    fetch_wait_ms: int = 0
    reopen: Callable[[int], Any] | None = None

    def more_patient(self) -> bool:
        """Fetch with twice the wait from now on: a broker that must answer a fetch within
        its wait (Tansu) answers nothing at all when finding an offset in a long log takes
        longer, so a short wait never reads an old range again. False: as patient as it gets."""
        if self.reopen is None or self.fetch_wait_ms >= MAX_FETCH_WAIT_MS:
            return False
        self.fetch_wait_ms = min(2 * max(self.fetch_wait_ms, 1), MAX_FETCH_WAIT_MS)
        self.consumer.close()
        self.consumer = self.reopen(self.fetch_wait_ms)
        self.next_offset, self.leftover = -1, []
        return True


_CHANNELS: dict[tuple[str, str], CachedChannel] = {}


def cached_channel(
    bootstrap: str, channel: str, fetch_wait_ms: int, security: dict[str, str] | None = None
) -> CachedChannel:
    key = (bootstrap, channel)
    if key not in _CHANNELS:
        from confluent_kafka import Consumer

        def reopen(wait_ms: int) -> Any:
            return Consumer(consumer_conf(bootstrap, wait_ms, security))

        consumer = reopen(fetch_wait_ms)
        _CHANNELS[key] = CachedChannel(consumer, fetch_wait_ms=fetch_wait_ms, reopen=reopen)
    return _CHANNELS[key]


def consume_range(
    cached: CachedChannel,
    channel: str,
    start: int,
    end: int,
    timeout_s: float,
    max_bytes: int = 0,
) -> list[tuple[int, bytes]]:
    """The records of ``[start, end)`` of ``channel`` from ``start`` on: all of them, or with
    ``max_bytes`` as many as reach it (at least one; the caller asks again after the last
    for the rest). Fails loudly if stuck."""
    from confluent_kafka import TopicPartition

    if cached.next_offset < 0 or not _continues(cached, start):
        cached.next_offset, cached.leftover = start, []
    # assigned for the read only: an unassigned consumer does not fetch (an idle executor
    # costs the broker nothing); pause/resume proved unreliable (a resumed partition
    # sometimes never fetched again)
    taken = _Taken(max_bytes)
    rest = []
    for offset, value in cached.leftover:
        if offset < start:
            continue
        if offset < end and not taken.full:
            taken.add(offset, value)
        else:
            rest.append((offset, value))
    cached.leftover = rest
    records = taken.records
    next_offset = records[-1][0] + 1 if records else start
    if next_offset >= end or cached.leftover:
        return records  # the previous read fetched this range already
    cached.consumer.assign([TopicPartition(channel, 0, cached.next_offset)])
    deadline = time.monotonic() + timeout_s
    reread = -1  # the offset of the last gap read again
    progress = (next_offset, time.monotonic())
    try:
        while next_offset < end and not cached.leftover and not taken.full:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(
                    f"{channel}: read stuck at offset {next_offset} of [{start}, {end})"
                )
            if progress[0] != next_offset:
                progress = (next_offset, now)
            elif now - progress[1] > STALL_S and cached.more_patient():
                log.warning(
                    "channel read stalled; fetching with a longer wait",
                    extra={
                        "channel": channel,
                        "offset": next_offset,
                        "fetch_wait_ms": cached.fetch_wait_ms,
                    },
                )
                cached.consumer.assign([TopicPartition(channel, 0, next_offset)])
                cached.next_offset, progress = next_offset, (next_offset, now)
            first = cached.consumer.poll(0.1)  # then drain what is buffered
            for record in [first, *cached.consumer.consume(999, 0)] if first else []:
                if record.error() is not None or record.offset() < next_offset:
                    continue
                if record.offset() > next_offset and reread != next_offset:
                    # the client skipped records (seen with Tansu): read the gap again once;
                    # a gap that is still there is the log's own (e.g. transaction markers)
                    log.error(
                        "channel offsets skipped a range; reading it again",
                        extra={"channel": channel, "expected": next_offset, "got": record.offset()},
                    )
                    reread = next_offset
                    cached.consumer.assign([TopicPartition(channel, 0, next_offset)])
                    break
                cached.next_offset = record.offset() + 1
                if record.offset() >= end or taken.full:
                    cached.leftover.append((record.offset(), record.value()))
                    continue
                taken.add(record.offset(), record.value())
                next_offset = record.offset() + 1
            if reread >= next_offset:
                continue  # until the gap is read again, the position is the skipping read's
            if next_offset < end and not taken.full and _position(cached.consumer, channel) >= end:
                break  # the rest of the range holds no records (transaction markers)
    except BaseException:
        cached.next_offset = -1  # unknown state: seek next time
        raise
    finally:
        cached.consumer.unassign()
    return records


@dataclass
class _Taken:
    """The records one ``consume_range`` call returns, up to its byte budget (0: none)."""

    max_bytes: int
    records: list[tuple[int, bytes]] = field(default_factory=list)
    size: int = 0

    @property
    def full(self) -> bool:
        return self.max_bytes > 0 and self.size >= self.max_bytes

    def add(self, offset: int, value: bytes | None) -> None:
        self.records.append((offset, value or b""))
        self.size += len(value or b"")


def _continues(cached: CachedChannel, start: int) -> bool:
    first = cached.leftover[0][0] if cached.leftover else cached.next_offset
    return first == start


def _position(consumer: Any, channel: str) -> int:
    from confluent_kafka import TopicPartition

    try:
        return consumer.position([TopicPartition(channel, 0)])[0].offset
    except Exception:
        return -1


_STORES: dict[tuple[str, ...], Any] = {}


def object_store(options: dict[str, str]) -> Any:
    """The S3 client of this Python worker, created on first use (never at import)."""
    key = tuple(options.get(f"s3_{k}", "") for k in _S3_KEYS)
    if key not in _STORES:
        from vectide.services.common.config import S3Config
        from vectide.services.common.objectstore import ObjectStore

        # unsigned bodies: hashing every binlog for the signature cost more than encoding
        # some of them (each still carries a CRC32)
        config = S3Config(**dict(zip(_S3_KEYS, key, strict=True)))
        _STORES[key] = ObjectStore(config, sign_payload=False)
    return _STORES[key]


_S3_KEYS = ("endpoint", "access_key", "secret_key", "region", "bucket", "root_path")


def s3_options(s3: Any) -> dict[str, str]:
    """Source options carrying the S3 settings to the executors."""
    return {f"s3_{k}": str(getattr(s3, k)) for k in _S3_KEYS}


# -- the driver's view of the tick index ----------------------------------------------------


class TickIndexTail:
    """The driver's consumer of the tick index (``msgstream/tick_index.py``): one small
    record per tick round instead of every payload of every channel.

    It starts near the index's end: a batch needs no entry before its start, since every
    offset below a known tick exists (the planner cuts a long stretch by its record cap).
    ``follow`` says whether the index can be trusted now: the topic exists and an entry
    arrived within ``stale_s`` (the rootcoord ticks at least every second even when idle).
    Otherwise, e.g. a rootcoord from before the index, the reader scans the channels."""

    #: entries read back from the index's end at start, so the first batch can cut at once
    BACKLOG = 64

    def __init__(self, conf: dict[str, Any], topic: str, stale_s: float) -> None:
        self._conf = conf
        self.topic = topic
        self.stale_s = stale_s
        self._consumer: Any = None
        self._checked = float("-inf")
        self._last_entry = float("-inf")

    def follow(self, planner: OffsetPlanner, budget_s: float) -> bool:
        """Feed the planner what the index holds since the last call; whether it is live."""
        now = time.monotonic()
        if self._consumer is None:
            if now - self._checked < self.stale_s:
                return False
            self._checked = now
            if not self._open():
                return False
            self._last_entry = now  # a grace period for the first entries
        deadline = now + budget_s
        while time.monotonic() < deadline:
            batch = self._consumer.consume(500, 0)
            if not batch:
                break
            for record in batch:
                if record.error() is not None:
                    continue
                entry = decode_entry(record.value())
                if entry:
                    self._last_entry = time.monotonic()
                for channel, (offset, ts) in entry.items():
                    planner.observe(channel, Seen(offset, 0, ts))
        return time.monotonic() - self._last_entry <= self.stale_s

    def _open(self) -> bool:
        """Assign the consumer near the index's end; False when the topic does not exist."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._conf)
        try:
            topics = consumer.list_topics(self.topic, timeout=5).topics
            meta = topics.get(self.topic)
            if meta is None or meta.error is not None or not meta.partitions:
                consumer.close()
                return False
            low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=5)
        except Exception as exc:  # any failure: scan, ask again later
            log.warning("tick index unreadable", extra={"topic": self.topic, "error": str(exc)})
            consumer.close()
            return False
        consumer.assign([TopicPartition(self.topic, 0, max(low, high - self.BACKLOG))])
        self._consumer = consumer
        log.info("following the tick index", extra={"topic": self.topic})
        return True

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


# -- the Spark adapter ----------------------------------------------------------------------


@dataclass
class ChannelRange(InputPartition):
    channel: str
    start: int
    end: int


@dataclass
class Checkpoints(InputPartition):
    """Ranges the driver read and found to hold only ticks: their positions (channel, offset
    after the last tick, its stamp) are all the task reports, without reading the channels."""

    positions: list[tuple[str, int, int]]


class ChannelStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = dict(options)
        self.bootstrap = options["bootstrap"]
        self.security = json.loads(options.get("kafka_secret_conf", "{}"))
        self.channels = [c for c in options["channels"].split(",") if c]
        self.scan_ms = int(options.get("scan_ms", "300"))
        self.read_timeout_s = float(options.get("read_timeout_s", "60"))
        self.fetch_wait_ms = int(options.get("fetch_wait_ms", "10"))
        self.scan_fetch_wait_ms = int(options.get("scan_fetch_wait_ms", "500"))
        self.wake_file = options.get("wake_file", "")
        self.limits = PlanLimits(
            max_records=int(options.get("max_records_per_channel", "2000")),
            max_bytes=int(options.get("max_bytes_per_channel", str(256 * 1024 * 1024))),
            idle_advance_s=float(options.get("idle_advance_s", "30")),
        )
        self.index_topic = options.get("tick_index", "")
        self.index_stale_s = float(options.get("index_stale_s", "10"))
        self._planner: OffsetPlanner | None = None
        self._scanner: Any = None
        self._index: TickIndexTail | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # driver state stays on the driver
        state["_scanner"] = state["_planner"] = state["_index"] = None
        return state

    def initialOffset(self) -> dict[str, int]:
        return dict.fromkeys(self.channels, 0)

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        if self._planner is None:
            self._planner = OffsetPlanner(self.channels, self.limits)
        seeks = self._planner.rebase(start)
        if self._index is None and self.index_topic:
            self._index = TickIndexTail(
                consumer_conf(self.bootstrap, self.scan_fetch_wait_ms, self.security),
                self.index_topic,
                self.index_stale_s,
            )
        if self._index is not None and self._index.follow(self._planner, self.scan_ms / 1000):
            self._stop_scanner()  # the index tells where the ticks are: no payload read
        else:
            self._scan(seeks)  # no index (yet, or any more): read the channels
        return self._planner.plan(read_flush_wanted(self.wake_file))

    def _scan(self, seeks: dict[str, int]) -> None:
        """Take what the scanner fetched since the last trigger, until drained or
        ``scan_ms`` passed. The scanner keeps fetching between triggers with a long fetch
        wait (``scan_fetch_wait_ms``): a few requests a second when idle, never a seek."""
        from confluent_kafka import Consumer, TopicPartition

        assert self._planner is not None
        if self._scanner is None:
            self._scanner = Consumer(
                consumer_conf(self.bootstrap, self.scan_fetch_wait_ms, self.security)
            )
            seeks = {c: s.scanned_to for c, s in self._planner.scans.items()}
        if seeks:
            self._scanner.assign(
                [
                    TopicPartition(c, 0, seeks.get(c, self._planner.scans[c].scanned_to))
                    for c in self.channels
                ]
            )
            self._scanner.consume(1, self.scan_fetch_wait_ms / 1000 * 2)  # first fetch
        deadline = time.monotonic() + self.scan_ms / 1000
        while time.monotonic() < deadline:
            batch = self._scanner.consume(2000, 0)
            if not batch:
                break
            for record in batch:
                if record.error() is None:
                    value = record.value() or b""
                    self._planner.observe(
                        record.topic(), Seen(record.offset(), len(value), tick_ts(value))
                    )

    def partitions(
        self, start: dict[str, int], end: dict[str, int]
    ) -> list[ChannelRange | Checkpoints]:
        """Tasks of at most ``TASK_RECORDS`` offsets per channel range with data (split the
        same way on a replay); one task for all tick-only ranges (an idle batch), so moving
        idle checkpoints reads nothing back from the broker."""
        ranges: list[ChannelRange | Checkpoints] = []
        ticks: list[tuple[str, int, int]] = []
        for channel in self.channels:
            first, last = int(start.get(channel, 0)), int(end.get(channel, 0))
            if last <= first:
                continue
            tick = self._planner.last_tick(channel, first, last) if self._planner else None
            if tick is None:
                ranges.extend(
                    ChannelRange(channel, a, min(a + TASK_RECORDS, last))
                    for a in range(first, last, TASK_RECORDS)
                )
            else:
                ticks.append((channel, *tick))
        return [*ranges, Checkpoints(ticks)] if ticks else ranges

    def read(self, partition: ChannelRange | Checkpoints) -> Iterator[tuple[str, str]]:
        """Executor: persist one channel's range and describe what was written."""
        from vectide.services.common.segment import BatchReport
        from vectide.streaming.flush import (
            BatchStats,
            ParallelPuts,
            Record,
            checkpoints_only,
            merge_into,
            process_batch,
            report_rows,
        )

        executor = f"{os.uname().nodename}:{os.getpid()}"
        if isinstance(partition, Checkpoints):
            report, stats = checkpoints_only(partition.positions)
            stats.executor = executor
            yield from report_rows(report, stats)
            return
        cached = cached_channel(
            self.bootstrap, partition.channel, self.fetch_wait_ms, self.security
        )
        store = ParallelPuts(object_store(self.options))
        report, stats = BatchReport([], [], {}), BatchStats()
        seen: set[tuple[int, ...]] = set()
        position = partition.start
        try:
            while position < partition.end:
                # one piece of at most max_bytes at a time: a task's memory stays bounded
                # whatever the range (the driver may not know its bytes); the pieces follow
                # from the records' sizes, so a replay writes the same objects
                started = time.monotonic()
                raw = consume_range(
                    cached,
                    partition.channel,
                    position,
                    partition.end,
                    self.read_timeout_s,
                    self.limits.max_bytes,
                )
                if not raw:
                    break
                consumed = time.monotonic()
                records = [Record(partition.channel, offset, value) for offset, value in raw]
                merge_into(report, stats, *process_batch(records, store, seen))
                store.drain()  # the piece's uploads done before the next piece is read
                stats.consume_ms += int((consumed - started) * 1000)
                stats.write_ms += int((time.monotonic() - consumed) * 1000)
                position = raw[-1][0] + 1
        finally:
            store.join()  # every object is on S3 before the driver hears of it
        stats.executor = executor
        yield from report_rows(report, stats)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: Spark's checkpoint is the source of truth for offsets."""

    def _stop_scanner(self) -> None:
        if self._scanner is not None:
            log.info("tick index found: the driver stops reading the channels")
            self._scanner.close()
            self._scanner = None

    def stop(self) -> None:
        self._stop_scanner()
        if self._index is not None:
            self._index.close()
            self._index = None


class ChannelSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "vectide_channels"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> ChannelStreamReader:
        return ChannelStreamReader(dict(self.options))
