"""What the broker says about a mapped topic: its partitions and where each ends."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition


def partition_ends(conf: Mapping[str, Any], topic: str, timeout_s: float = 5.0) -> dict[int, int]:
    """Partition -> high watermark; empty when the topic does not exist (yet).

    Some brokers (Tansu) report a watermark behind the true end; the lag shown by `vectide
    ingest list` takes the larger of this and what the owning worker last saw.
    """
    consumer = Consumer({**conf, "group.id": f"vectide-ingest-probe-{uuid.uuid4().hex[:8]}"})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        ends = {}
        for partition in meta.partitions:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s
            )
            ends[partition] = max(high, 0)
        return ends
    except KafkaException:
        return {}
    finally:
        consumer.close()
