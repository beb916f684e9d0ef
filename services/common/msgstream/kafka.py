"""Kafka adapters of the channel layer: topic admin, a producer and a tick-aligned consumer.

Written for Kafka's semantics and nothing more: consumers ``assign()`` explicit offsets (no
group rebalancing, no reliance on ``latest`` or watermarks), producers are idempotent with
``acks=all``, and a record that does not decode is logged and skipped, never fatal.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from vectide.services.common.config import KafkaConfig
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import Message, MsgPack, Position, TimeTickMsg
from vectide.services.common.msgstream.tick_aligner import PendingFences, TickAligner
from vectide.services.common.pacer import Pacer

log = logging.getLogger(__name__)
#: librdkafka's own log lines go through Python logging (structured, quiet by default).
rdkafka_log = logging.getLogger("vectide.rdkafka")


#: librdkafka security settings every client of this process uses (see ``use_security``).
_security: dict[str, str] = {}


def security_settings(kafka: KafkaConfig) -> dict[str, str]:
    """librdkafka settings for the ``kafka.security_*``/``sasl_*``/``ssl_*`` config keys;
    empty ones are left out, so the defaults mean plaintext."""
    settings = {
        "security.protocol": kafka.security_protocol,
        "sasl.mechanisms": kafka.sasl_mechanism,
        "sasl.username": kafka.sasl_username,
        "sasl.password": kafka.sasl_password,
        "ssl.ca.location": kafka.ssl_ca_location,
    }
    return {key: value for key, value in settings.items() if value}


def use_security(kafka: KafkaConfig) -> None:
    """Make every Kafka client this process creates from now on authenticate as configured.
    Set once at start-up (the launcher does), so no call site has to carry credentials."""
    _security.clear()
    _security.update(security_settings(kafka))


def _client_conf(bootstrap: str, **overrides: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "logger": rdkafka_log, **_security, **overrides}


class ChannelError(RuntimeError):
    """The broker refused or could not complete a channel operation."""


def ensure_topics(bootstrap: str, topics: Iterable[str], timeout_s: float = 30.0) -> list[str]:
    """Create missing topics with one partition each (order within a channel is the
    contract); returns the topics it created."""
    admin = AdminClient(_client_conf(bootstrap))
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [t for t in dict.fromkeys(topics) if t not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=-1) for t in missing],
        operation_timeout=timeout_s,
    )
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ChannelError(f"cannot create topic {topic}: {exc}") from exc
    return missing


DeliveryCallback = Callable[[Exception | None, int], None]


class ChannelProducer:
    """Writes messages to channels. ``send`` blocks until the broker has them."""

    def __init__(self, bootstrap: str, extra: Mapping[str, object] | None = None) -> None:
        conf = _client_conf(
            bootstrap,
            **{
                "enable.idempotence": True,
                "acks": "all",
                # send() waits for the ack with every message of the write already queued,
                # so librdkafka batches them without lingering; a linger would only add its
                # time to every acknowledged write (1 ms measured 5.1 against 4.1 ms for a
                # 512 KB insert message acked by Tansu)
                "linger.ms": 0,
                "message.max.bytes": 64 * 1024 * 1024,
            },
        )
        conf.update(extra or {})
        self._producer = Producer(conf)
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll_loop, name="producer-poll", daemon=True)
        self._poller.start()

    def _poll_loop(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def produce(self, channel: str, msg: Message, on_delivery: DeliveryCallback) -> None:
        """Queue ``msg``; ``on_delivery(error, offset)`` runs on the poller thread."""

        def report(err: KafkaError | None, record: object) -> None:
            if err is not None:
                on_delivery(ChannelError(f"write to {channel} failed: {err.str()}"), -1)
            else:
                on_delivery(None, record.offset())  # type: ignore[attr-defined]

        self._produce_raw(channel, codec.encode(msg), report)

    def _produce_raw(self, channel: str, value: bytes, report: Callable) -> None:
        while True:
            try:
                self._producer.produce(channel, value=value, on_delivery=report)
                return
            except BufferError:  # local queue full: let deliveries drain
                self._producer.poll(0.1)

    def send(self, messages: Sequence[tuple[str, Message]], timeout_s: float = 30.0) -> list[int]:
        """Write every ``(channel, message)`` and wait for all; returns their offsets."""
        offsets = [-1] * len(messages)
        errors: list[Exception] = []
        remaining = [len(messages)]
        done = threading.Event()
        lock = threading.Lock()

        def make_callback(i: int) -> DeliveryCallback:
            def callback(err: Exception | None, offset: int) -> None:
                with lock:
                    if err is not None:
                        errors.append(err)
                    offsets[i] = offset
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        done.set()

            return callback

        if not messages:
            return []
        for i, (channel, msg) in enumerate(messages):
            self.produce(channel, msg, make_callback(i))
        if not done.wait(timeout_s):
            raise ChannelError(f"{remaining[0]} of {len(messages)} writes unacknowledged")
        if errors:
            raise errors[0]
        return offsets

    def produce_bytes(
        self, channel: str, value: bytes, on_error: Callable[[Exception], None]
    ) -> None:
        """Queue bytes as they are without waiting; ``on_error`` runs (on the poller thread)
        only if the write fails."""

        def report(err: KafkaError | None, _record: object) -> None:
            if err is not None:
                on_error(ChannelError(f"write to {channel} failed: {err.str()}"))

        self._produce_raw(channel, value, report)

    def send_raw(self, channel: str, value: bytes, timeout_s: float = 30.0) -> None:
        """Write bytes as they are (tests use it to put poison records on a channel)."""
        done = threading.Event()
        self._produce_raw(channel, value, lambda err, rec: done.set())
        if not done.wait(timeout_s):
            raise ChannelError(f"raw write to {channel} unacknowledged")

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush, then let librdkafka go: a producer merely dropped keeps its connections
        (and logs every refusal of a broker stopped after it) until it is collected."""
        if self._closed.is_set():
            return
        self._producer.flush(timeout_s)
        self._closed.set()
        self._poller.join()
        self._producer.close()


def _reader(bootstrap: str, fetch_wait_ms: int, extra: Mapping[str, object] | None) -> Consumer:
    conf = _client_conf(
        bootstrap,
        **{
            # assign() needs no group; librdkafka still wants an id. Nothing is committed.
            "group.id": f"vectide-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": fetch_wait_ms,
            # insert messages run to 4 MiB. With librdkafka's 1 MiB default a consumer
            # tailing Tansu skipped one now and then (a 2.5 MB record, 1 in ~10 runs of the
            # Kafka ingest bench): rows acknowledged, persisted, and never searchable
            "max.partition.fetch.bytes": 64 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "enable.partition.eof": False,
        },
    )
    conf.update(extra or {})
    return Consumer(conf)


#: how long a standby-switching consumer stays fast after data or a hurry() (seconds)
ACTIVE_HOLD_S = 2.0
#: while slow, look at what the slow consumer fetched this often (a hurry() ends a wait at once)
SLOW_CHECK_S = 0.1
#: a reader waited this long and the fast consumer delivered nothing: it is not answered
#: (Tansu answers no short-wait fetch once finding an offset in a long log takes longer),
#: so the slow one reads for FAST_SUSPEND_S
FAST_STALL_S = 1.0
FAST_SUSPEND_S = 10.0
#: a fast consumer's wait for records is cut into slices this long: a fence handed over
#: meanwhile may complete a pack without any record (librdkafka's poll cannot be woken)
FENCE_CHECK_S = 0.002


class ChannelConsumer:
    """Reads channels from explicit positions and yields complete, tick-aligned MsgPacks.

    With ``fetch_wait_idle_ms`` it adapts its fetch wait to what happens. Tansu answers a
    waiting fetch only when the wait expires, so a consumer that must deliver within
    milliseconds sends ~200 fetches a second, and an idle deployment's consumers kept the
    broker busy. Here two librdkafka consumers share the positions: a fast one
    (``fetch_wait_max_ms``) while data arrives or a reader waits (``hurry()``), and a slow
    one (``fetch_wait_idle_ms``) after ``active_hold_s`` without either. Only one is assigned
    at a time; a switch assigns the other at the next offset of every channel, so nothing is
    skipped, and records below those offsets are dropped, so nothing is delivered twice.
    ``wakes_on`` narrows which data counts: a shard's reader ignores other collections'
    writes on the same pchannel. With ``long_poll`` (a broker that answers as soon as data
    arrives, as Apache Kafka does) one consumer waits ``fetch_wait_idle_ms`` always: as fast,
    and cheap when idle.
    """

    def __init__(
        self,
        bootstrap: str,
        channels: Sequence[str],
        start: Mapping[str, Position] | None = None,
        fetch_wait_max_ms: int = 20,
        extra: Mapping[str, object] | None = None,
        fetch_wait_idle_ms: int | None = None,
        long_poll: bool = False,
        active_hold_s: float = ACTIVE_HOLD_S,
        wakes_on: Callable[[Message], bool] | None = None,
    ) -> None:
        start = dict(start or {})
        #: which data messages keep it fast (default all; a shard reader: its own shard's)
        self._wakes_on = wakes_on or (lambda msg: True)
        self._aligner = TickAligner(channels, start)
        #: next offset to deliver per channel (OFFSET_BEGINNING until the first record)
        self._next = {ch: start[ch].offset if ch in start else OFFSET_BEGINNING for ch in channels}
        adaptive = fetch_wait_idle_ms is not None and fetch_wait_idle_ms > fetch_wait_max_ms
        if adaptive and long_poll:
            fetch_wait_max_ms, adaptive = int(fetch_wait_idle_ms or 0), False
        self._fast = _reader(bootstrap, fetch_wait_max_ms, extra)
        self._slow = _reader(bootstrap, int(fetch_wait_idle_ms or 0), extra) if adaptive else None
        self._activity = Pacer(0.0, 0.0, hold_s=active_hold_s)
        self._activity.activity(time.monotonic())  # start fast: a new reader catches up
        self._hurried = threading.Event()
        self._fences = PendingFences()
        #: when a reader began to wait with no record since; until when fast is not used
        self._waiting_since: float | None = None
        self._fast_off_until = 0.0
        self._consumer = self._fast
        self._consumer.assign(self._assignment())
        self.poison_count = 0
        #: the last gap read again: (channel, offset)
        self._gap: tuple[str, int] | None = None

    @property
    def fast(self) -> bool:
        """Whether the fast consumer is the one reading."""
        return self._consumer is self._fast

    def hurry(self) -> None:
        """A reader waits for this consumer's channels: read fast from now on (thread-safe;
        a reading thread waiting in slow mode switches at once)."""
        now = time.monotonic()
        self._activity.activity(now)
        if self._waiting_since is None:
            self._waiting_since = now
        self._hurried.set()

    def fence(self, fence: Position) -> None:
        """A read waits for ``fence`` (a tick nobody wrote, see ``tick_aligner``): apply it
        once the channel was read up to its offset (thread-safe). Read that far already,
        the reading thread only needs waking: no fast fetches for the next seconds."""
        self._fences.add(fence)
        if self._next.get(fence.channel, -1) >= fence.offset:
            self._hurried.set()
        else:
            self.hurry()

    def _fenced(self) -> list[MsgPack]:
        """The packs completed by the fences the channels were read up to."""
        packs: list[MsgPack] = []
        for fence in self._fences.due(self._next):
            self._waiting_since = None  # the waiting reader is answered, not stalled
            packs += self._aligner.fence(fence)
        return packs

    def _assignment(self) -> list[TopicPartition]:
        return [TopicPartition(ch, 0, offset) for ch, offset in self._next.items()]

    def _switch(self, now: float) -> None:
        """Assign the consumer the activity calls for, at the next offsets."""
        if self._slow is None:
            return
        fast = self._activity.active(now) and now >= self._fast_off_until
        wanted = self._fast if fast else self._slow
        if wanted is self._consumer:
            return
        self._consumer.unassign()
        wanted.assign(self._assignment())
        self._consumer = wanted
        if wanted is self._fast and self._waiting_since is not None:
            self._waiting_since = now  # the fast one's own chance to answer

    @property
    def positions(self) -> dict[str, Position]:
        """Resume points after the last released pack: persist these to restart exactly."""
        return self._aligner.positions()

    def poll(self, timeout_s: float = 0.1, max_records: int = 1000) -> list[MsgPack]:
        """Read what is available (waiting at most ``timeout_s``) and return completed packs."""
        self._switch(time.monotonic())
        if not self.fast:
            # idle: a librdkafka poll cannot be interrupted, so wait on the hurry() event and
            # only then take what the slow consumer has buffered, without blocking
            if self._hurried.wait(min(timeout_s, SLOW_CHECK_S)):
                self._hurried.clear()
                self._switch(time.monotonic())
            if not self.fast:
                timeout_s = 0.0
        packs = self._fenced()
        gapped: set[str] = set()
        records = self._fetch(0.0 if packs else timeout_s, max_records)
        self._notice_stall(time.monotonic(), bool(records))
        for record in records:
            err = record.error()
            if err is not None:
                if err.fatal():
                    raise ChannelError(f"consumer failed: {err.str()}")
                log.warning("channel read error", extra={"error": err.str()})
                continue
            channel, offset = record.topic(), record.offset()
            expected = self._next.get(channel, OFFSET_BEGINNING)
            if 0 <= offset < expected:
                continue  # delivered before a switch of consumers
            if 0 <= expected < offset and self._refetch(channel, expected, offset):
                gapped.add(channel)
            if channel in gapped:
                continue  # read again from the gap on
            self._next[channel] = offset + 1
            try:
                msg = codec.decode(record.value())
            except codec.DecodeError as exc:
                self.poison_count += 1
                log.error(
                    "skipping undecodable record",
                    extra={"channel": record.topic(), "offset": record.offset(), "error": str(exc)},
                )
                continue
            if not isinstance(msg, TimeTickMsg) and self._wakes_on(msg):
                self._activity.activity(time.monotonic())  # data flows: stay fast
            packs += self._aligner.feed(channel, offset, msg)
        packs += self._fenced()
        self._switch(time.monotonic())  # data just came: the next fetch is already fast
        return packs

    def _notice_stall(self, now: float, delivered: bool) -> None:
        """A fast consumer that leaves a reader waiting is set aside for a while."""
        if delivered:
            self._waiting_since = None
        elif (
            self.fast
            and self._slow is not None
            and self._waiting_since is not None
            and now - self._waiting_since > FAST_STALL_S
        ):
            log.warning(
                "short fetches are not answered; reading with the idle fetch wait for a while",
                extra={"channels": sorted(self._next), "for_s": FAST_SUSPEND_S},
            )
            self._fast_off_until, self._waiting_since = now + FAST_SUSPEND_S, None
            self._switch(now)

    def _refetch(self, channel: str, expected: int, got: int) -> bool:
        """A record came after a gap in the channel's offsets: assign the consumer at the gap
        to read it again (True), once; a gap seen twice at the same place is the log's own
        (False). Records of other channels delivered twice meanwhile are dropped by offset."""
        first_time = self._gap != (channel, expected)
        log.error(
            "channel offsets skipped a range" + ("; reading it again" if first_time else ""),
            extra={"channel": channel, "expected": expected, "got": got},
        )
        if not first_time:
            return False
        self._gap = (channel, expected)
        self._consumer.assign(self._assignment())  # every channel at its next offset
        return True

    def _fetch(self, timeout_s: float, max_records: int) -> list[Any]:
        """Wait for one record, then take whatever else is already buffered.

        ``consume(n, timeout)`` alone waits the whole timeout unless ``n`` records arrive,
        which would add up to ``timeout`` to every read's wait for its timetick. The wait
        ends early, without a record, when a fence arrives.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            first = self._consumer.poll(min(FENCE_CHECK_S, max(deadline - time.monotonic(), 0)))
            if first is not None:
                return [first, *self._consumer.consume(max_records - 1, 0)]
            if self._fences or time.monotonic() >= deadline:
                return []

    def close(self) -> None:
        self._fast.close()
        if self._slow is not None:
            self._slow.close()
