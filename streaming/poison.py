"""Which decoded channel messages of one segment can be written together: the data node's
check that keeps one bad record from failing a whole micro-batch.

A micro-batch concatenates every insert of a segment into one binlog per field; a message
whose fields, types or vector widths differ from the others' would make that concatenation
fail, Spark would retry the batch, fail again, and the data node would stop persisting
every channel. Such a message is skipped whole (atomically: none of its rows is written),
as an undecodable record is, and counted with its position. The layout most of the
segment's rows share wins, so a stray message cannot reject the genuine ones.

What this cannot see: a batch whose only insert into a segment is the bad one (the data
node does not know the collection's schema; the query node, which does, rejects it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from vectide.services.common.msgstream.message import FIXED_DTYPES, DeleteMsg, InsertMsg, row_width

#: a message at its channel offset
Placed = tuple[int, Any]


def fit_inserts(msgs: list[tuple[int, InsertMsg]]) -> tuple[list[Placed], list[Placed]]:
    """(messages to write, messages to skip with the reason) of one segment's inserts."""
    keep, skip = [], []
    for offset, msg in msgs:
        why = _bad_shape(msg)
        (skip if why else keep).append((offset, why or msg))
    weights: Counter = Counter()
    for _, msg in keep:
        weights[_layout(msg)] += msg.num_rows
    if len(weights) <= 1:
        return keep, skip
    winner = weights.most_common(1)[0][0]
    fits = [(o, m) for o, m in keep if _layout(m) == winner]
    skip += [
        (o, f"layout {_layout(m)} differs from the segment's {winner}")
        for o, m in keep
        if _layout(m) != winner
    ]
    return fits, skip


def fit_deletes(msgs: list[tuple[int, DeleteMsg]]) -> tuple[list[Placed], list[Placed]]:
    """(deletes to write, deletes to skip with the reason) of one shard: one key type."""
    kinds = Counter(isinstance(m.pks, list) for _, m in msgs)
    if len(kinds) <= 1:
        return msgs, []
    strings = kinds.most_common(1)[0][0]
    keep = [(o, m) for o, m in msgs if isinstance(m.pks, list) == strings]
    skip = [(o, "primary key type differs") for o, m in msgs if isinstance(m.pks, list) != strings]
    return keep, skip


def _bad_shape(msg: InsertMsg) -> str:
    for col in msg.fields:
        if col.data_type in FIXED_DTYPES:
            shape = np.shape(col.data)
            width = row_width(col.data_type, col.dim)
            want = (msg.num_rows, width) if width else (msg.num_rows,)
            if shape != want:
                return f"field {col.field_id}: shape {shape}, expected {want}"
    return ""


def _layout(msg: InsertMsg) -> tuple:
    """What must match for two messages' columns to be concatenated."""
    fields = tuple((c.field_id, int(c.data_type), c.dim) for c in msg.fields)
    return msg.collection_id, msg.partition_id, isinstance(msg.pks, list), fields
