"""The ingest role's own CPU work per record: decode a batch of Kafka values and build the
columns the proxy takes (``BatchApplier.apply`` into a writer that does nothing), in this
process, with no infrastructure. ``benchmarks/kafka_ingest.py`` measures the whole path.

``python -m benchmarks.ingest_decode [--rows N] [--dim D]`` prints records/s for JSON and
plain Avro values of ``{"id", "vector"}`` (float vectors): the best of five passes, in CPU
time of this process (the box is shared: wall time would measure the neighbours).
"""

from __future__ import annotations

import argparse
import io
import time
from typing import Any

import fastavro
import numpy as np
import orjson

from benchmarks.common import log
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.ingest.batcher import BatchApplier, KafkaRecord
from vectide.services.ingest.decode import avro_schema


class _NullWriter:
    """The proxy's write path doing nothing: what is left is the ingest role's own work."""

    def __init__(self, info: CollectionInfo) -> None:
        self.info = info
        self.rows = 0

    def describe_collection(self, name: str) -> CollectionInfo:
        return self.info

    def upsert(self, collection: str, partition: str, columns: dict, num_rows: int) -> None:
        self.rows += num_rows

    insert = upsert

    def delete_pks(self, collection: str, partition: str, pks: Any) -> None:
        pass


def _values(fmt: str, schema: CollectionSchema, vectors: np.ndarray) -> list[bytes]:
    if fmt == "json":
        return [
            orjson.dumps({"id": i, "vector": v}, option=orjson.OPT_SERIALIZE_NUMPY)
            for i, v in enumerate(vectors)
        ]
    parsed = fastavro.parse_schema(avro_schema(schema))
    values = []
    for i, v in enumerate(vectors.tolist()):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"id": i, "vector": v})
        values.append(out.getvalue())
    return values


def decode_rate(
    fmt: str, rows: int = 20_000, dim: int = 128, batch: int = 5000, repeat: int = 5
) -> float:
    """Records per second of the decode+batch path over ``rows`` records in batches of
    ``batch`` (``ingest.batch_rows``' default), the best of ``repeat`` passes."""
    fields = [
        FieldSchema(100, "id", DataType.INT64, is_primary=True),
        FieldSchema(101, "vector", DataType.FLOAT_VECTOR, dim=dim),
    ]
    schema = CollectionSchema("bench", fields)
    info = CollectionInfo(1, "bench", schema, 1, [], [], ConsistencyLevel.BOUNDED, 0)
    vectors = np.random.default_rng(7).normal(size=(rows, dim)).astype(np.float32)
    records = [KafkaRecord("t", 0, i, None, v) for i, v in enumerate(_values(fmt, schema, vectors))]
    best = float("inf")
    for _ in range(repeat):
        writer = _NullWriter(info)
        applier = BatchApplier(writer, "bench", fmt=fmt)
        started = time.process_time()
        for lo in range(0, rows, batch):
            outcome = applier.apply(records[lo : lo + batch])
            assert not outcome.dead, outcome.dead[0].error
        best = min(best, time.process_time() - started)
        assert writer.rows == rows
    return rows / best


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--dim", type=int, default=128)
    args = p.parse_args(argv)
    for fmt in ("json", "avro"):
        rate = decode_rate(fmt, args.rows, args.dim)
        log(f"ingest decode+batch, {args.dim}-d {fmt}: {rate:,.0f} records/s")


if __name__ == "__main__":
    main()
