"""Ingest mappings (topic -> collection) and per-partition progress, kept in the metastore.

A mapping is what `vectide ingest add` records; every ingest worker reads the same list, so
mappings survive restarts and reach running workers without a restart of their own.

Progress is the truth for where a mapping resumes: per topic partition, the next offset to
apply and how many records were applied or dead-lettered. It is written in one metastore
transaction after the proxy acknowledged a batch, checked against the value the writer last
saw, so a worker that lost a partition in a rebalance cannot overwrite its new owner's
progress (it is fenced, and the new owner re-applies at most what was in flight: upserts make
that harmless).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from vectide.services.common.kv.base import MetaKV, Txn

FORMATS = ("json", "avro")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAPPINGS = "ingest/mappings"
PROGRESS = "ingest/progress"


class MappingError(ValueError):
    """A mapping cannot be added as given (bad name, format, duplicate)."""


@dataclass(frozen=True)
class IngestMapping:
    name: str
    topic: str
    collection: str
    format: str = "json"
    #: dead-letter topic; empty means ``<topic>.dlq``
    dlq: str = ""
    #: Confluent Schema Registry URL: Avro values carry the Confluent wire framing
    schema_registry: str = ""
    #: Milvus partition the rows go to (empty: ``_default``)
    partition: str = ""

    @property
    def dlq_topic(self) -> str:
        return self.dlq or f"{self.topic}.dlq"

    @property
    def group_id(self) -> str:
        """The consumer group of this mapping: replicas of the ingest role share it."""
        return f"vectide-ingest-{self.name}"

    def validate(self) -> IngestMapping:
        if not _NAME.match(self.name):
            raise MappingError(
                f"invalid mapping name {self.name!r}: letters, digits, '.', '_' and '-' only"
            )
        if not self.topic or not self.collection:
            raise MappingError("a mapping needs a topic and a collection")
        if self.format not in FORMATS:
            raise MappingError(f"unknown format {self.format!r}: one of {', '.join(FORMATS)}")
        if self.schema_registry and self.format != "avro":
            raise MappingError("--schema-registry applies to the avro format only")
        if self.dlq_topic == self.topic:
            raise MappingError("the dead-letter topic must differ from the source topic")
        return self

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> IngestMapping:
        return cls(**json.loads(raw))


@dataclass(frozen=True)
class Progress:
    """Where one topic partition of a mapping stands."""

    #: next offset to apply (-1: nothing applied yet, start at the beginning)
    offset: int = -1
    applied: int = 0
    failed: int = 0
    #: the end of the partition as the owner last saw it (for lag, where watermarks lag)
    end: int = 0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> Progress:
        return cls(**json.loads(raw)) if raw else cls()

    @property
    def lag(self) -> int:
        return max(0, self.end - max(self.offset, 0))


@dataclass
class MappingStats:
    """What `vectide ingest list` shows for one mapping, summed over its partitions."""

    mapping: IngestMapping
    partitions: dict[int, Progress] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            **asdict(self.mapping),
            "dlq": self.mapping.dlq_topic,
            "lag": sum(p.lag for p in self.partitions.values()),
            "applied": sum(p.applied for p in self.partitions.values()),
            "failed": sum(p.failed for p in self.partitions.values()),
        }


def _progress_key(mapping: str, topic: str, partition: int) -> str:
    return f"{PROGRESS}/{mapping}/{topic}/{partition}"


class MappingStore:
    def __init__(self, kv: MetaKV) -> None:
        self._kv = kv

    def add(self, mapping: IngestMapping) -> None:
        mapping.validate()
        if not self._kv.compare_and_set(f"{MAPPINGS}/{mapping.name}", None, mapping.to_json()):
            raise MappingError(f"mapping {mapping.name!r} exists: remove it first")

    def remove(self, name: str) -> bool:
        """Forget the mapping and its progress (adding it again starts from the beginning)."""
        found = self._kv.get(f"{MAPPINGS}/{name}") is not None
        self._kv.delete(f"{MAPPINGS}/{name}")
        self._kv.delete(f"{PROGRESS}/{name}")
        return found

    def list(self) -> list[IngestMapping]:
        found = self._kv.list_prefix(MAPPINGS)
        return sorted((IngestMapping.from_json(v) for v in found.values()), key=lambda m: m.name)

    def get(self, name: str) -> IngestMapping | None:
        raw = self._kv.get(f"{MAPPINGS}/{name}")
        return IngestMapping.from_json(raw) if raw else None

    # -- progress ------------------------------------------------------------------------------

    def progress_raw(self, mapping: str, topic: str, partition: int) -> bytes | None:
        return self._kv.get(_progress_key(mapping, topic, partition))

    def save_progress(
        self,
        mapping: str,
        updates: dict[tuple[str, int], tuple[bytes | None, Progress]],
    ) -> dict[tuple[str, int], bytes] | None:
        """Write new progress for several partitions at once, each checked against the raw
        value its writer last saw. Returns the new raw values, or None when fenced."""
        txn = Txn()
        written: dict[tuple[str, int], bytes] = {}
        for (topic, partition), (expected, progress) in updates.items():
            key = _progress_key(mapping, topic, partition)
            raw = progress.to_json()
            txn.checks[key] = expected
            txn.puts[key] = raw
            written[(topic, partition)] = raw
        return written if self._kv.commit(txn) else None

    def stats(self, ends: Callable[[str], dict[int, int]] | None = None) -> list[MappingStats]:
        """Every mapping's progress; ``ends(topic)`` (partition -> end offset, from the
        broker) counts records no worker has looked at yet into the lag."""
        out = []
        for mapping in self.list():
            prefix = f"{PROGRESS}/{mapping.name}/{mapping.topic}"
            partitions = {
                int(key[len(prefix) + 1 :]): Progress.from_json(raw)
                for key, raw in self._kv.list_prefix(prefix).items()
            }
            for partition, end in (ends(mapping.topic) if ends else {}).items():
                seen = partitions.get(partition, Progress())
                partitions[partition] = replace(seen, end=max(seen.end, end))
            out.append(MappingStats(mapping, partitions))
        return out
