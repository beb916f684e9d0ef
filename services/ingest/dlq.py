"""The dead-letter producer: refused records go to ``<topic>.dlq`` with the reason attached.

The original key and value are kept byte for byte and the headers say where the record came
from and why it was refused, so a person can fix and re-send it. ``send`` returns only once
the broker has every dead letter: the worker moves its offsets past a refused record only
after that, so a refused record is never lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException, Producer

from vectide.services.ingest.batcher import DeadLetter


class DeadLetterError(RuntimeError):
    """The broker did not take the dead letters; the batch is retried."""


class DeadLetterProducer:
    def __init__(self, conf: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self._producer = Producer(
            {**conf, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
        self._timeout_s = timeout_s
        self._closed = False

    def send(self, topic: str, letters: Sequence[DeadLetter]) -> None:
        if not letters:
            return
        errors: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        try:
            for letter in letters:
                self._producer.produce(
                    topic,
                    key=letter.record.key,
                    value=letter.record.value,
                    headers=letter.headers(),
                    on_delivery=delivered,
                )
                self._producer.poll(0)
        except (KafkaException, BufferError) as exc:
            raise DeadLetterError(f"dead-letter topic {topic}: {exc}") from exc
        if self._producer.flush(self._timeout_s) > 0 or errors:
            raise DeadLetterError(
                f"dead-letter topic {topic}: {errors[0] if errors else 'flush timed out'}"
            )

    def close(self) -> None:
        """Flush, then release librdkafka's connections (closing twice is harmless)."""
        if self._closed:
            return
        self._closed = True
        self._producer.flush(self._timeout_s)
        self._producer.close()
