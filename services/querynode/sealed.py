"""Sealed segments: a flushed segment read back from its binlogs into an in-memory shard
store, searched through the index node's index file once it arrives, and until then through
an interim IVF_FLAT the query node's builder makes for it (``build_stand_in``), as its rows
were while growing (an exact scan of a 500k-row segment costs ~10 ms a search).
"""

from __future__ import annotations

import faiss
import numpy as np

from vectide.services.common import binlog
from vectide.services.common.binlog import PK_FIELD, TS_FIELD
from vectide.services.common.index_spec import InterimIndex
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
    for entry in segment.parts_in_row_order():

        def column(field_id: int, data_type: DataType, dim: int = 0, entry=entry):
            return binlog.read_column(store.get(entry.paths[str(field_id)]), data_type, dim)

        pks = column(PK_FIELD, pk_type)[0]
        stamps = column(TS_FIELD, DataType.INT64)[0]
        fields = []
        for f in schema.fields:
            # a part written before AddCollectionField added ``f`` has no file of it: the
            # store fills the column (its default value, or nulls)
            if not f.is_primary and str(f.field_id) in entry.paths:
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
        if path is None or chunks is None or (chunks.indexed_rows and not chunks.provisional):
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


def build_stand_in(sealed: ShardStore, interim: InterimIndex, chunk_rows: int) -> int:
    """Give each vector field of a sealed segment still waiting for its index file an interim
    index over all its rows (``InterimIndex.sealed_spec``); returns how many were built. Its
    rows never change (deletes reach faiss as the read's mask), so no lock is needed; a file
    installed meanwhile wins (``ChunkIndexes.stand_in`` refuses)."""
    built = 0
    for field, chunks in sealed.indexes.items():
        if chunks.indexed_rows:
            continue
        spec = interim.sealed_spec(chunks.spec, sealed.num_rows, chunk_rows)
        if spec is None:
            continue
        vectors, held = sealed.index_input(field, 0, sealed.num_rows)
        built += chunks.stand_in(spec, spec.build(vectors, held))
    return built
