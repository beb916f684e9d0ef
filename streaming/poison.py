"""Which decoded channel messages of one segment can be written together: the data node's
check that keeps one bad record from failing a whole micro-batch.

A micro-batch concatenates every insert of a segment into one binlog per field; a message
whose field types or vector widths differ from the others' would make that concatenation
fail (a field some messages lack is fine: AddCollectionField added it after they were
written, and their rows get nulls), Spark would retry the batch, fail again, and the data
node would stop persisting every channel. Such a message is skipped whole (atomically: none
of its rows is written), as an undecodable record is, and counted with its position. The
layout most of the segment's rows share wins, so a stray message cannot reject the genuine
ones.

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
    """(messages to write, messages to skip with the reason) of one segment's inserts.

    Messages may carry different sets of fields (those written before AddCollectionField
    added one lack it: the binlog holds nulls for their rows); what must agree is the
    collection, partition and key type, and the type and width of each field they share."""
    keep, skip = [], []
    for offset, msg in msgs:
        why = _bad_shape(msg)
        (skip if why else keep).append((offset, why or msg))
    base = _winner(_weights(keep, _base))
    specs: dict[int, Counter] = {}
    for _, msg in keep:
        for c in msg.fields:
            specs.setdefault(c.field_id, Counter())[_spec(c)] += msg.num_rows
    chosen = {field_id: _winner(weights) for field_id, weights in specs.items()}
    fits = []
    for offset, msg in keep:
        why = _misfit(msg, base, chosen)
        if why:
            skip.append((offset, why))
        else:
            fits.append((offset, msg))
    return fits, skip


def _weights(placed: list[Placed], key: Any) -> Counter:
    weights: Counter = Counter()
    for _, msg in placed:
        weights[key(msg)] += msg.num_rows
    return weights


def _winner(weights: Counter) -> Any:
    """The value most rows share (None when there is none)."""
    return weights.most_common(1)[0][0] if weights else None


def _misfit(msg: InsertMsg, base: tuple, chosen: dict[int, tuple]) -> str:
    if _base(msg) != base:
        return f"layout {_base(msg)} differs from the segment's {base}"
    for c in msg.fields:
        if _spec(c) != chosen[c.field_id]:
            return f"field {c.field_id}: {_spec(c)} differs from the segment's {chosen[c.field_id]}"
    return ""


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


def _base(msg: InsertMsg) -> tuple:
    """What every message of a segment must share to be written together."""
    return msg.collection_id, msg.partition_id, isinstance(msg.pks, list)


def _spec(col: Any) -> tuple:
    """What must match for two messages' columns of one field to be concatenated."""
    return int(col.data_type), col.dim
