"""Grouping search (``group_by_field``): hits grouped by a scalar field's value.

A grouped result per query is at most ``limit`` groups of at most ``group_size`` hits each,
groups ordered by their best hit and each group's hits best first, flattened into one list
(Milvus's ``reduceSearchResultDataWithGroupBy``). Each level applies the same selection to
hits sorted best first: a segment store to its own search (exact: it searches deeper until
its groups are full), a query node to its stores' and shards' groups, the proxy to every
node's groups, skipping the first ``offset`` groups last.

Merged that way the groups chosen are exact (a group among the best overall is among the
best of the store holding its best hit), but a group's other hits may sit in stores where it
was not among the best: Milvus leaves those out. Vectide searches twice when
``group_size > 1``: first for the groups (one hit each), then for their hits only, filtered
to the groups chosen (:func:`restrict_to_groups`), where every store returns them all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectide.services.common import errors
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.results import SearchHits, best_first, reduce_hits
from vectide.services.common.schema import CollectionSchema, FieldSchema

#: scalar types a search may group by (Milvus refuses floats, JSON, arrays and vectors)
GROUPABLE = frozenset(
    {
        DataType.BOOL,
        DataType.INT8,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.VARCHAR,
    }
)


def group_by_field(schema: CollectionSchema, name: str) -> FieldSchema:
    """The field ``name`` names, if a search may group by it (Milvus's errors otherwise)."""
    field = schema.field(name)
    if field is None:
        raise errors.MilvusError(
            errors.Code.FIELD_NOT_FOUND,
            f"groupBy field not found in schema: field not found[field={name}]",
        )
    if field.data_type not in GROUPABLE:
        raise errors.invalid(
            f"unsupported data type {type_name(field.data_type)} for group by operator"
        )
    return field


def type_name(data_type: DataType) -> str:
    """Milvus's spelling of a type in its messages (``FloatVector``, ``VarChar``, ``JSON``)."""
    special = {DataType.JSON: "JSON", DataType.VARCHAR: "VarChar"}
    if data_type in special:
        return special[data_type]
    return "".join(part.capitalize() for part in data_type.name.split("_"))


def select_groups(values: list[Any], limit: int, group_size: int, offset: int = 0) -> np.ndarray:
    """Positions kept among hits sorted best first whose group values are ``values``: the
    first ``offset`` groups skipped, then up to ``limit`` groups of up to ``group_size`` hits,
    group by group (each group's first hit is its best, so groups come best first)."""
    members: dict[Any, list[int]] = {}
    skipped: set[Any] = set()
    for position, value in enumerate(values):
        if value in skipped:
            continue
        group = members.get(value)
        if group is None:
            if len(skipped) < offset:
                skipped.add(value)
                continue
            if len(members) >= limit:
                continue
            group = members[value] = []
        if len(group) < group_size:
            group.append(position)
    return np.array([p for group in members.values() for p in group], dtype=np.int64)


def groups_settled(values: list[Any], limit: int, group_size: int, totals: dict[Any, int]) -> bool:
    """Whether hits sorted best first (with group ``values``) already decide the selection:
    the first ``limit`` groups to appear (every group there is, if fewer) each hold
    ``group_size`` hits or all their rows (``totals``: rows per group among the candidates).
    No hit further down can then change what :func:`select_groups` keeps."""
    seen: dict[Any, int] = {}
    for value in values:
        seen[value] = seen.get(value, 0) + 1
    first = list(seen)[:limit]  # in order of first appearance
    if len(first) < min(limit, len(totals)):
        return False
    return all(seen[g] >= min(group_size, totals[g]) for g in first)


def merge_groups(
    parts: list[SearchHits], limit: int, group_size: int, offset: int = 0
) -> SearchHits:
    """Several parts' grouped hits as one grouped result per query (see the module)."""
    like = next(p for p in parts if p.nq)

    def pick(scores: np.ndarray, groups: list[Any]) -> np.ndarray:
        order = best_first(scores, like)
        return order[select_groups([groups[i] for i in order], limit, group_size, offset)]

    return reduce_hits(parts, pick)


def as_values(column: Any) -> list[Any]:
    """A group-by column as plain Python values (numpy scalars hash unlike their values)."""
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


#: the expression template parameter a second grouping search filters its groups with
GROUPS_PARAM = "__vectide_groups"


def restrict_to_groups(
    expr: str, params: dict[str, Any], field: str, values: list[Any]
) -> tuple[str, dict[str, Any]]:
    """``expr`` narrowed to rows whose ``field`` is one of ``values`` (None: null)."""
    present = [v for v in values if v is not None]
    clauses = [f"{field} in {{{GROUPS_PARAM}}}"] if present else []
    if len(present) < len(values):
        clauses.append(f"{field} is null")
    narrowed = " or ".join(clauses)
    if expr.strip():
        narrowed = f"({expr}) and ({narrowed})"
    return narrowed, {**params, GROUPS_PARAM: present}
