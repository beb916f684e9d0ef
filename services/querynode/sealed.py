"""Sealed segments: a flushed segment read back from its binlogs into an in-memory shard
store (with the collection's interim index per chunk, so reads use faiss as for growing data).
"""

from __future__ import annotations

import faiss
import numpy as np

from vectide.services.common import binlog
from vectide.services.common.binlog import PK_FIELD, TS_FIELD
from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
from vectide.services.common.schema import CollectionInfo
from vectide.services.common.segment import Deltalog, SegmentInfo
from vectide.services.querynode.segment import ShardStore


def load_sealed(
    info: CollectionInfo, segment: SegmentInfo, store: binlog.Store, chunk_rows: int
) -> ShardStore:
    schema = info.schema
    # one chunk: the segment's index covers the whole segment, as its index file does
    sealed = ShardStore(schema, info.indexes, max(segment.num_rows, 1))
    sealed.reserve(segment.num_rows)
    pk_type = schema.primary.data_type
    for log_id in sorted(segment.binlogs):
        entry = segment.binlogs[log_id]

        def column(field_id: int, data_type: DataType, dim: int = 0, entry=entry):
            return binlog.read_column(store.get(entry.paths[str(field_id)]), data_type, dim)

        pks = column(PK_FIELD, pk_type)[0]
        stamps = column(TS_FIELD, DataType.INT64)[0]
        fields = []
        for f in schema.fields:
            if not f.is_primary:
                values, valid = column(f.field_id, f.data_type, f.dim)
                fields.append(FieldColumn(f.field_id, f.name, f.data_type, values, f.dim, valid))
        sealed.insert(
            InsertMsg(
                msg_id=0,
                ts=int(stamps.max()),
                source_id=0,
                collection_id=info.collection_id,
                partition_id=segment.partition_id,
                segment_id=segment.segment_id,
                shard=segment.vchannel,
                pks=pks,
                row_ids=np.zeros(len(pks), np.int64),
                timestamps=stamps,
                fields=fields,
            )
        )
    install_index_files(info, segment, sealed, store)
    sealed.build_scalar_indexes()
    return sealed


def install_index_files(
    info: CollectionInfo, segment: SegmentInfo, sealed: ShardStore, store: binlog.Store
) -> int:
    """Take the segment's index files the store does not have yet; returns how many."""
    installed = 0
    for index in info.indexes:
        path = segment.index_files.get(str(index.index_id))
        chunks = sealed.indexes.get(index.field_name)
        if path is None or chunks is None or chunks.indexed_rows:
            continue
        raw = np.frombuffer(store.get(path), np.uint8)
        built = faiss.deserialize_index(raw)
        del raw  # the file's bytes, as big as the index: not kept beside it
        sealed.install_index(index.field_name, built)
        installed += 1
    return installed


def read_deltalogs(
    deltalogs: list[Deltalog], store: binlog.Store
) -> list[tuple[np.ndarray | list[str], np.ndarray]]:
    return [binlog.decode_deltas(store.get(d.path)) for d in deltalogs]
