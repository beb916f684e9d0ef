"""The tick index: where each TimeTick the active rootcoord wrote sits in its channel.

The data node cuts its micro-batches at ticks. Finding them by reading the channels meant
fetching every payload from the broker a second time (once by the driver to find the ticks,
once by the executors to write them). Only the rootcoord writes ticks, and the broker's
acknowledgement tells it their offsets, so after each tick round it publishes one small
record ``{channel: [offset, stamp]}`` to the cluster's tick-index topic; the driver tails
that topic instead of the channels.

Every entry is a fact on its own (a tick with that stamp is at that offset), so a reader
needs no entry before its start, tolerates a lost one (a cut it does not know of) and
entries from two rootcoords during a hand-over (each is true).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def tick_index_topic(cluster: str) -> str:
    """The cluster's tick-index topic (one partition, created with the channels)."""
    return f"{cluster}-tickindex"


def encode_entry(ticks: Mapping[str, tuple[int, int]]) -> bytes:
    """One tick round: channel -> (offset of its TimeTick record, the tick's stamp)."""
    return json.dumps({ch: [offset, ts] for ch, (offset, ts) in ticks.items()}).encode()


def decode_entry(value: bytes | None) -> dict[str, tuple[int, int]]:
    """An entry's ticks; {} for anything that is not an entry (never fails a reader)."""
    try:
        data = json.loads(value or b"")
        return {str(ch): (int(pair[0]), int(pair[1])) for ch, pair in data.items()}
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        return {}


class KafkaTickIndex:
    """Publishes tick rounds without waiting: the ticker must not wait a broker round trip
    more per round, and a lost entry only means one cut fewer for the data node."""

    def __init__(self, producer: Any, topic: str) -> None:
        #: a ``ChannelProducer``: idempotent, so entries keep their order
        self._producer = producer
        self.topic = topic

    def publish(self, ticks: Mapping[str, tuple[int, int]]) -> None:
        if ticks:
            self._producer.produce_bytes(self.topic, encode_entry(ticks), self._failed)

    def _failed(self, error: Exception) -> None:
        log.warning("tick index entry not written", extra={"error": str(error)})
