"""Poison in a data node micro-batch: a message that decodes but cannot be written with its
segment's other rows is skipped whole, counted and logged with its position; the rest of
the batch is written and checkpointed (before, it failed the batch on every replay)."""

from __future__ import annotations

import logging

import numpy as np

from tests.fakes import DictStore
from tests.unit.test_datanode_batch import VCH, insert, records
from vectide.services.common import binlog
from vectide.services.common.msgstream.message import DataType, DeleteMsg, FieldColumn, TimeTickMsg
from vectide.streaming.flush import PK_FIELD, process_batch
from vectide.streaming.poison import fit_inserts


def persisted_pks(store: DictStore) -> list[int]:
    keys = [k for k in store.list("insert_log/") if f"/{PK_FIELD}/" in k]
    return sorted(pk for k in keys for pk in binlog.decode_column(store.get(k), DataType.INT64))


def test_a_message_of_another_vector_width_is_skipped_not_the_batch(caplog):
    narrow = insert(5, [3, 4], 11)
    narrow.fields[0] = FieldColumn(101, "v", DataType.FLOAT_VECTOR, np.ones((2, 3), "<f4"), 3)
    store = DictStore()
    with caplog.at_level(logging.ERROR, logger="vectide.streaming.flush"):
        report, stats = process_batch(
            records(narrow, insert(5, [1, 2], 10), insert(5, [6], 12), TimeTickMsg(0, 13, 0)),
            store,
        )
    # the stray message came first, yet the layout most rows share wins
    assert (stats.rows, stats.poison) == (3, 1)
    assert persisted_pks(store) == [1, 2, 6]
    assert report.checkpoints["c-dml_0"].ts == 13  # the channel moves past the poison
    [logged] = [r for r in caplog.records if "cannot be written" in r.message]
    assert (logged.channel, logged.offset) == ("c-dml_0", 0)


def test_a_message_for_another_collection_in_the_segment_is_skipped():
    stranger = insert(5, [7], 11)
    stranger.collection_id = 99
    store = DictStore()
    _, stats = process_batch(records(insert(5, [1, 2], 10), stranger), store)
    assert (stats.rows, stats.poison) == (2, 1) and persisted_pks(store) == [1, 2]


def test_a_column_whose_shape_does_not_match_its_rows_is_skipped():
    ragged = insert(5, [8, 9], 11)
    ragged.fields[0].data = np.ones(8, "<f4")  # flat, not (rows, dim)
    good = insert(5, [1], 10)
    keep, skip = fit_inserts([(0, good), (1, ragged)])
    assert keep == [(0, good)]
    assert [offset for offset, _ in skip] == [1] and "shape (8,)" in skip[0][1]


def test_deletes_with_a_different_key_type_are_skipped():
    ints = DeleteMsg(10, 10, 0, 7, -1, VCH, np.array([1, 2]), np.array([10, 10]))
    strings = DeleteMsg(11, 11, 0, 7, -1, VCH, ["a"], np.array([11]))
    report, stats = process_batch(records(ints, strings, TimeTickMsg(0, 12, 0)), DictStore())
    assert (stats.deletes, stats.poison) == (2, 1)
    assert len(report.deltalogs) == 1
