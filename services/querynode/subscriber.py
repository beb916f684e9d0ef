"""Feeds a QueryNode from Kafka: one reader thread per watched shard.

Each reader's consumer reads fast (``fetch_wait_max_ms``) while data arrives or a read of
its shard waits (``hurry``), and slowly (``fetch_wait_idle_ms``) otherwise: an idle shard
costs the broker a few fetches a second instead of ~200 (see ``ChannelConsumer``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from vectide.services.common.msgstream.kafka import ChannelConsumer
from vectide.services.common.msgstream.message import CollectionDDLMsg, Message, Position
from vectide.services.querynode.core import QueryNode

log = logging.getLogger(__name__)


def _ours(vchannel: str) -> Callable[[Message], bool]:
    """Writes to this shard (and any DDL) make its reader fast; other collections' writes on
    the same pchannel do not: their readers are the ones that need to be fast."""
    return lambda msg: isinstance(msg, CollectionDDLMsg) or getattr(msg, "shard", None) == vchannel


class KafkaSubscriber:
    def __init__(
        self,
        bootstrap: str,
        node: QueryNode,
        fetch_wait_max_ms: int = 20,
        fetch_wait_idle_ms: int | None = None,
        long_poll: bool = False,
    ) -> None:
        self._bootstrap = bootstrap
        self._node = node
        self._fetch_wait_max_ms = fetch_wait_max_ms
        self._fetch_wait_idle_ms = fetch_wait_idle_ms
        self._long_poll = long_poll
        self._readers: dict[str, tuple[threading.Thread, threading.Event, ChannelConsumer]] = {}
        #: undecodable records skipped by readers that have been closed
        self._closed_poison = 0
        #: vchannel -> the error its reader keeps hitting (cleared by the next good poll)
        self._failing: dict[str, str] = {}
        self._lock = threading.Lock()

    def subscribe(self, vchannel: str, pchannel: str, start_offset: int) -> None:
        stop = threading.Event()
        # Position ts 0: deliver everything from the collection's creation offset on.
        consumer = ChannelConsumer(
            self._bootstrap,
            [pchannel],
            start={pchannel: Position(pchannel, start_offset, 0)},
            fetch_wait_max_ms=self._fetch_wait_max_ms,
            fetch_wait_idle_ms=self._fetch_wait_idle_ms,
            long_poll=self._long_poll,
            wakes_on=_ours(vchannel),
        )
        thread = threading.Thread(
            target=self._run, args=(vchannel, consumer, stop), name=f"qn-{vchannel}", daemon=True
        )
        with self._lock:
            self._readers[vchannel] = (thread, stop, consumer)
        thread.start()

    def hurry(self, vchannel: str, fence: Position | None = None) -> None:
        """A read of ``vchannel`` is about to wait for its tsafe: fetch fast (and apply its
        fence once read up to it)."""
        entry = self._readers.get(vchannel)
        if entry is None:
            return
        if fence is None:
            entry[2].hurry()
        else:
            entry[2].fence(fence)

    def _run(self, vchannel: str, consumer: ChannelConsumer, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    for pack in consumer.poll(0.1):
                        self._node.apply(vchannel, pack)
                    self._failing.pop(vchannel, None)
                except Exception as exc:
                    self._failing[vchannel] = str(exc)
                    log.exception("shard reader error; retrying", extra={"vchannel": vchannel})
                    stop.wait(1.0)
        finally:
            consumer.close()

    def problems(self) -> dict[str, str]:
        """Shards that are not being fed: a dead reader, or one failing on every poll."""
        with self._lock:
            readers = dict(self._readers)
        found = {v: "reader thread died" for v, (t, _, _) in readers.items() if not t.is_alive()}
        found.update({v: e for v, e in self._failing.items() if v in readers})
        return found

    def unsubscribe(self, vchannel: str) -> None:
        with self._lock:
            entry = self._readers.pop(vchannel, None)
        if entry is not None:
            thread, stop, consumer = entry
            stop.set()
            if thread is not threading.current_thread():
                thread.join(timeout=10)
            with self._lock:
                self._closed_poison += consumer.poison_count

    def undecodable(self) -> int:
        """Records on the channels that were not Vectide messages, skipped since start."""
        with self._lock:
            return self._closed_poison + sum(c.poison_count for _, _, c in self._readers.values())

    def close(self) -> None:
        for vchannel in list(self._readers):
            self.unsubscribe(vchannel)
