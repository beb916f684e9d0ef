"""Query aggregations: GROUP BY fields with count, sum, min, max and avg (Milvus 3.0's query
aggregation, which pymilvus 3 sends: ``group_by_fields`` in the query parameters, the
aggregates as output fields such as ``count(color)`` or ``AVG(price)``).

The work is split as Milvus splits it, so a query node never ships rows to the proxy:
every store reduces its matching rows to one *partial* row per group (``partial``), the
query node and then the proxy reduce the partial rows they gathered the same way
(``combine``), and the proxy turns the last partial rows into the reply (``finish``). A
partial row holds the group's keys and, per aggregate, how many values it counted
(``{i}:n``) and its running sum, minimum or maximum (``{i}:v``; avg keeps a sum), so
reducing partial rows is reducing rows: one function does both.

Semantics (SQL's, as Milvus's): nulls are not counted, summed or compared; a group whose
values are all null has a null sum, minimum, maximum and average; rows whose key is null
form one group; an aggregation without group fields answers one row, also over no rows.
Groups come in the order of their keys (ascending, nulls last), so pages (offset, limit)
are stable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectide.services.common import errors, grouping
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.order_by import distinct_ranks
from vectide.services.common.results import concat, take
from vectide.services.common.schema import CollectionSchema

#: the query parameter naming the group fields, comma-separated
GROUP_BY_PARAM = "group_by_fields"
COUNT_STAR = "count(*)"

_INTEGERS = frozenset(
    {DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.TIMESTAMPTZ}
)
_NUMBERS = _INTEGERS - {DataType.TIMESTAMPTZ} | {DataType.FLOAT, DataType.DOUBLE}
#: field types rows are grouped by: a grouping search's, and TIMESTAMPTZ (Milvus's)
GROUPABLE = grouping.GROUPABLE | {DataType.TIMESTAMPTZ}
#: field types each function takes
_TAKES = {
    "count": _NUMBERS | GROUPABLE,
    "sum": _NUMBERS,
    "avg": _NUMBERS,
    "min": _NUMBERS | GROUPABLE,
    "max": _NUMBERS | GROUPABLE,
}
_CALL = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$", re.DOTALL)


@dataclass(frozen=True)
class Aggregate:
    """One aggregate output: ``count(color)`` as the client wrote it."""

    output: str
    #: count, sum, min, max or avg
    function: str
    #: the aggregated field ("" for ``count(*)``)
    field: str
    #: the aggregated field's type (INT64 for ``count(*)``)
    data_type: DataType

    @property
    def result_type(self) -> DataType:
        if self.function == "count":
            return DataType.INT64
        if self.function == "avg":
            return DataType.DOUBLE
        if self.function == "sum":
            return DataType.INT64 if self.data_type in _INTEGERS else DataType.DOUBLE
        return self.data_type

    @property
    def kept(self) -> str:
        """How the running value of a partial row reduces: sum, min or max ("": count
        keeps no value, only how many it counted)."""
        return {"count": "", "avg": "sum"}.get(self.function, self.function)


@dataclass(frozen=True)
class Aggregation:
    """A query's GROUP BY fields and aggregates, checked against the schema."""

    group_by: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    #: the reply's columns, in the order the client listed them
    outputs: tuple[str, ...]

    def inputs(self) -> list[str]:
        """The columns the stores read: the group fields and the aggregated fields."""
        fields = [a.field for a in self.aggregates if a.field]
        return list(dict.fromkeys([*self.group_by, *fields]))


def parse_aggregation(
    output_fields: Sequence[str], group_by: str, schema: CollectionSchema
) -> Aggregation | None:
    """The aggregation a query asks for, or None for a plain query (``count(*)`` alone
    without group fields is Milvus's row count, served as before)."""
    keys = group_fields(group_by)
    names = list(dict.fromkeys(n.strip() for n in output_fields if n.strip()))
    aggregates = {n: a for n in names if (a := _aggregate_of(n, schema)) is not None}
    if not keys and (not aggregates or [n.lower() for n in names] == [COUNT_STAR]):
        return None
    for key in keys:
        _check_group_field(key, schema)
    for name in names:
        if name not in aggregates and name not in keys:
            raise errors.invalid(
                f"output field {name} is neither a group by field nor an aggregation: "
                "with group_by_fields or aggregates, list only those"
            )
    for key in keys:
        if key not in names:
            raise errors.invalid(f"group by field {key} must be in output_fields")
    return Aggregation(keys, tuple(aggregates.values()), tuple(names))


def group_fields(text: str) -> tuple[str, ...]:
    """The fields a ``group_by_fields`` value names, comma-separated, each once."""
    return tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))


def _aggregate_of(name: str, schema: CollectionSchema) -> Aggregate | None:
    call = _CALL.match(name)
    if call is None:
        if "(" in name or ")" in name:
            raise errors.invalid(f"invalid aggregation {name}: write function(field)")
        return None
    function, argument = call.group(1).lower(), call.group(2).strip()
    if function not in _TAKES:
        raise errors.invalid(
            f"unsupported aggregation function {call.group(1)} in {name}: "
            "count, sum, min, max or avg"
        )
    if not argument:
        raise errors.invalid(f"aggregation {name} names no field")
    if argument == "*":
        if function != "count":
            raise errors.invalid(f"{function}(*) is not an aggregation: only count(*) is")
        return Aggregate(name, function, "", DataType.INT64)
    field = schema.field(argument)
    if field is None:
        raise errors.invalid(f"aggregation {name}: field {argument} not exist")
    if field.data_type not in _TAKES[function]:
        raise errors.invalid(
            f"aggregation operator {function} does not support data type "
            f"{grouping.type_name(field.data_type)}"
        )
    return Aggregate(name, function, field.name, field.data_type)


def _check_group_field(key: str, schema: CollectionSchema) -> None:
    field = schema.field(key)
    if field is None:
        raise errors.invalid(f"group by field {key} not exist")
    if field.data_type not in GROUPABLE:
        raise errors.invalid(
            f"group by field {key} has unsupported data type {grouping.type_name(field.data_type)}"
        )


# -- reducing rows --------------------------------------------------------------------------


def partial(agg: Aggregation, columns: Mapping[str, Any], rows: int) -> dict[str, Any]:
    """A store's matching rows reduced to partial rows: ``columns`` holds ``agg.inputs()``
    as stores output them (None at null rows)."""
    state: dict[str, Any] = {key: columns[key] for key in agg.group_by}
    for i, a in enumerate(agg.aggregates):
        values = columns[a.field] if a.field else None
        state[f"{i}:n"] = (
            np.ones(rows, np.int64) if values is None else _present(values).astype(np.int64)
        )
        if a.kept:
            state[f"{i}:v"] = values
    return combine(agg, [state])


def combine(agg: Aggregation, parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Partial rows (of several stores, nodes or shards) reduced to one per group."""
    names = [*agg.group_by, *_state_columns(agg)]
    merged = {n: concat([p[n] for p in parts]) for n in names}
    rows = _length(agg, merged)
    if rows == 0:
        return _empty(agg)
    order, starts = _groups([merged[k] for k in agg.group_by], rows)
    out: dict[str, Any] = {k: take(merged[k], order[starts]) for k in agg.group_by}
    for i, a in enumerate(agg.aggregates):
        counts = np.asarray(merged[f"{i}:n"], dtype=np.int64)[order]
        out[f"{i}:n"] = np.add.reduceat(counts, starts)
        if a.kept:
            values = take(merged[f"{i}:v"], order)
            out[f"{i}:v"] = _reduce(a, values, starts, counts > 0, out[f"{i}:n"] > 0)
    return out


def finish(
    agg: Aggregation, state: Mapping[str, Any], offset: int = 0, limit: int | None = None
) -> dict[str, Any]:
    """The reply's columns from the last partial rows: averages divided out, groups paged."""
    columns: dict[str, Any] = {k: state[k] for k in agg.group_by}
    for i, a in enumerate(agg.aggregates):
        counts = np.asarray(state[f"{i}:n"], dtype=np.int64)
        if a.function == "count":
            columns[a.output] = counts
        elif a.function == "avg":
            sums = state[f"{i}:v"]
            columns[a.output] = [
                None if n == 0 else float(s) / n for s, n in zip(sums, counts.tolist(), strict=True)
            ]
        else:
            columns[a.output] = state[f"{i}:v"]
    groups = _length(agg, state)
    end = groups if limit is None else min(groups, offset + limit)
    index = np.arange(min(offset, groups), end)
    return {name: take(columns[name], index) for name in agg.outputs}


def _length(agg: Aggregation, state: Mapping[str, Any]) -> int:
    """How many (partial) rows ``state`` holds: every aggregation has a count or a key."""
    return len(state["0:n"]) if agg.aggregates else len(state[agg.group_by[0]])


def _state_columns(agg: Aggregation) -> list[str]:
    names = []
    for i, a in enumerate(agg.aggregates):
        names.append(f"{i}:n")
        if a.kept:
            names.append(f"{i}:v")
    return names


def _empty(agg: Aggregation) -> dict[str, Any]:
    """No rows: no group, or, without group fields, the one row SQL answers over nothing."""
    groups = 0 if agg.group_by else 1
    out: dict[str, Any] = {k: [] for k in agg.group_by}
    for i, a in enumerate(agg.aggregates):
        out[f"{i}:n"] = np.zeros(groups, np.int64)
        if a.kept:
            out[f"{i}:v"] = [None] * groups
    return out


def _groups(keys: list[Any], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The permutation putting rows of one group together, groups in key order, and where
    each group starts in it."""
    if not keys:
        return np.arange(rows), np.zeros(1, np.int64)
    ranks = np.stack([distinct_ranks(values) for values in keys])
    order = np.lexsort(ranks[::-1])
    placed = ranks[:, order]
    changes = np.flatnonzero(np.any(placed[:, 1:] != placed[:, :-1], axis=0)) + 1
    return order, np.concatenate([[0], changes]).astype(np.int64)


def _reduce(
    a: Aggregate, values: Any, starts: np.ndarray, present: np.ndarray, found: np.ndarray
) -> Any:
    """Each group's sum, minimum or maximum of its present values (rows in group order);
    None for a group without one (``found`` False)."""
    known = values[present] if isinstance(values, np.ndarray) else _known(values, present)
    if a.kept == "sum":
        filled = np.zeros(len(present), np.int64 if a.result_type == DataType.INT64 else np.float64)
        filled[present] = known
        sums = np.add.reduceat(filled, starts)
        if bool(found.all()):
            return sums
        return [s if ok else None for s, ok in zip(sums.tolist(), found.tolist(), strict=True)]
    distinct, ranks = _distinct(known)
    placed = np.full(len(present), len(distinct) if a.kept == "min" else -1, np.int64)
    placed[present] = ranks
    best = (np.minimum if a.kept == "min" else np.maximum).reduceat(placed, starts)
    # a group without a value kept its sentinel (out of ``distinct``'s range): null
    return [
        distinct[r] if ok else None for r, ok in zip(best.tolist(), found.tolist(), strict=True)
    ]


def _known(values: list[Any], present: np.ndarray) -> list[Any]:
    return [v for v, ok in zip(values, present.tolist(), strict=True) if ok]


def _distinct(values: Any) -> tuple[list[Any], np.ndarray]:
    """The distinct values in order, and each value's place among them."""
    if not len(values):
        return [], np.zeros(0, np.int64)
    found, ranks = np.unique(np.asarray(values), return_inverse=True)
    return found.tolist(), ranks.reshape(-1).astype(np.int64)


def _present(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return np.ones(len(values), dtype=bool)
    return np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
