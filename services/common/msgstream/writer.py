"""The ChannelWriter port on Kafka: write messages, return offsets once acknowledged."""

from __future__ import annotations

from collections.abc import Sequence

from vectide.services.common.msgstream.kafka import ChannelProducer
from vectide.services.common.msgstream.message import Message


class KafkaChannelWriter:
    def __init__(self, bootstrap: str) -> None:
        self.producer = ChannelProducer(bootstrap)

    def write(self, messages: Sequence[tuple[str, Message]]) -> list[int]:
        return self.producer.send(messages)

    def close(self) -> None:
        self.producer.close()
