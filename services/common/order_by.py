"""ORDER BY of searches and queries: Milvus's ``order_by_fields`` (pymilvus 2.6.17 sends it
with a search, pymilvus 3 with a query too), as ``"price:desc,name"``.

A search orders its hits: the best ``offset + limit`` by distance, each query's reordered by
the keys (ties keep their distance order), then the page. A query orders every row its filter
matches by the keys, ties by primary key: each query node keeps its first ``offset + limit``
in that order and the proxy merges them the same way, so a page is the same whichever shards
hold the rows.

Keys are scalar fields Milvus sorts (bool, integers, float, double, varchar) or a path into a
JSON field or the dynamic field (``meta["price"]``, or a bare dynamic key such as ``age``).
Nulls (a nullable field's, a missing or null JSON value) count as larger than every value,
as PostgreSQL orders them: last ascending, first descending. JSON values of one kind compare
as that kind (numbers, strings, booleans); values of different kinds, or arrays and objects,
compare by their JSON text, as Milvus's proxy compares them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectide.services.common import errors
from vectide.services.common.expr.parser import ExprError, Field, PathKey, parse
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import DYNAMIC_FIELD, CollectionSchema

#: the read parameter that carries the keys
ORDER_BY_PARAM = "order_by_fields"
#: the column of a key on the primary key (rows and hits carry their keys beside their
#: fields, ``order_of`` takes them apart)
PRIMARY_KEY = ""
SORTABLE = frozenset(
    {
        DataType.BOOL,
        DataType.INT8,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.FLOAT,
        DataType.DOUBLE,
        DataType.VARCHAR,
    }
)
_DIRECTIONS = {"": True, "asc": True, "ascending": True, "desc": False, "descending": False}


@dataclass(frozen=True)
class OrderKey:
    """One ORDER BY key, resolved against the schema."""

    #: the column holding the values: a schema field, or ``$meta`` for a dynamic key
    column: str
    #: keys inside the column's JSON values (empty for a scalar field)
    path: tuple[PathKey, ...] = ()
    ascending: bool = True


def parse_order_by(text: str, schema: CollectionSchema) -> tuple[OrderKey, ...]:
    """The keys of an ``order_by_fields`` parameter, checked against ``schema``."""
    keys = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        written, direction = _split_direction(item)
        if not written:
            raise errors.invalid("empty field name in order_by_fields")
        ascending = _DIRECTIONS.get(direction.lower())
        if ascending is None:
            raise errors.invalid(
                f"invalid order direction '{direction}' for field '{written}', "
                "expected 'asc' or 'desc'"
            )
        keys.append(_key_of(written, ascending, schema))
    return tuple(keys)


def _split_direction(item: str) -> tuple[str, str]:
    """``'meta["a:b"]:desc'`` -> (``'meta["a:b"]'``, ``'desc'``): the last colon outside
    brackets splits them."""
    depth, cut = 0, -1
    for i, char in enumerate(item):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == ":" and depth == 0:
            cut = i
    if cut < 0:
        return item.strip(), ""
    return item[:cut].strip(), item[cut + 1 :].strip()


def _key_of(written: str, ascending: bool, schema: CollectionSchema) -> OrderKey:
    try:
        node = parse(written)
    except ExprError:
        node = None
    if not isinstance(node, Field):
        raise errors.invalid(f"invalid order_by field '{written}'")
    if node.name == DYNAMIC_FIELD:
        if not node.path:
            raise errors.invalid(f"order_by field '{written}' has unsortable type JSON")
        return OrderKey(DYNAMIC_FIELD, node.path, ascending)
    field = schema.field(node.name)
    if field is None:
        if not schema.enable_dynamic_field:
            raise errors.invalid(
                f"order_by field '{node.name}' does not exist in collection schema"
            )
        return OrderKey(DYNAMIC_FIELD, (node.name, *node.path), ascending)
    if field.data_type == DataType.JSON and node.path:
        return OrderKey(field.name, node.path, ascending)
    if node.path:
        raise errors.invalid(f"order_by field '{written}' has brackets but is not a JSON type")
    if field.is_primary:
        return OrderKey(PRIMARY_KEY, (), ascending)
    if field.data_type not in SORTABLE:
        raise errors.invalid(
            f"order_by field '{written}' has unsortable type {field.data_type.name}; supported "
            "types: bool, int8/16/32/64, float, double, varchar; for JSON fields use path "
            'syntax like field["key"]'
        )
    return OrderKey(field.name, (), ascending)


def columns_of(keys: Sequence[OrderKey]) -> list[str]:
    """The columns a read must fetch to order by ``keys`` (the primary keys come anyway)."""
    return list(dict.fromkeys(key.column for key in keys if key.column != PRIMARY_KEY))


def order_of(
    columns: Mapping[str, Any],
    keys: Sequence[OrderKey],
    pks: Any,
    ties_by_pk: bool = True,
    within: np.ndarray | None = None,
) -> np.ndarray:
    """The permutation that orders rows by ``keys``: ``columns`` holds the keys' columns,
    ``pks`` the rows' primary keys. Rows equal by every key follow their primary keys,
    ascending, or (``ties_by_pk=False``) keep their order. ``within``: each row's run (a
    search's query index, ascending): rows are ordered inside their run, runs stay put."""
    ranks = [_ranks(pks if key.column == PRIMARY_KEY else columns[key.column], key) for key in keys]
    if within is not None:
        ranks.insert(0, within)
    if ties_by_pk:
        ranks.append(_ranks(pks, OrderKey(PRIMARY_KEY)))
    return np.lexsort(ranks[::-1])  # lexsort's last key is the first it sorts by


def distinct_ranks(values: Any) -> np.ndarray:
    """Each row's place among the column's distinct values, ascending, nulls (None) after
    every value: equal values share a rank (the GROUP BY of query aggregations)."""
    return _ranks(values, OrderKey(PRIMARY_KEY))


def _ranks(values: Any, key: OrderKey) -> np.ndarray:
    """Each row's place among the column's distinct values in the key's order, nulls after
    every value ascending and before them descending: rows sort by these integers."""
    if key.path:
        values = [_at(text, key.path) for text in values]
    present = [v is not None for v in values] if isinstance(values, list) else None
    if present is not None and not all(present):
        mask = np.array(present, dtype=bool)
        known = _value_ranks([v for v in values if v is not None], bool(key.path))
        ranks = np.full(len(mask), known.max(initial=-1) + 1, dtype=np.int64)
        ranks[mask] = known
    else:
        ranks = _value_ranks(values, bool(key.path))
    return ranks if key.ascending else ranks.max(initial=0) - ranks


def _value_ranks(values: Any, json_values: bool) -> np.ndarray:
    kinds = {_kind(v) for v in values} if json_values else set()
    if not json_values or (len(kinds) == 1 and "other" not in kinds):  # one kind: numpy sorts
        dtype = np.float64 if kinds == {"number"} else None  # JSON numbers compare as floats
        array = values if isinstance(values, np.ndarray) else np.array(values, dtype=dtype)
        return np.unique(array, return_inverse=True)[1].reshape(-1).astype(np.int64)
    texts = [_json_text(v) for v in values]
    distinct = sorted(dict(zip(texts, values, strict=True)).items(), key=_JSON_ORDER)
    place, rank = {}, -1
    for i, (text, value) in enumerate(distinct):
        if i == 0 or _compare_json(distinct[i - 1], (text, value)):
            rank += 1
        place[text] = rank
    return np.array([place[t] for t in texts], dtype=np.int64)


def _at(text: Any, path: tuple[PathKey, ...]) -> Any:
    """The JSON value at ``path`` of a JSON text (None: null, missing or not JSON)."""
    if not text:
        return None
    try:
        value = json.loads(text) if isinstance(text, str | bytes) else text
    except ValueError:
        return None
    for step in path:
        holds = (
            isinstance(value, list) and isinstance(step, int) and -len(value) <= step < len(value)
        ) or (isinstance(value, dict) and isinstance(step, str) and step in value)
        if not holds:
            return None
        value = value[step]
    return value


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "other"


def _compare_json(left: tuple[str, Any], right: tuple[str, Any]) -> int:
    """Two JSON values, each with its text: by value when of one kind, else by text."""
    (left_text, a), (right_text, b) = left, right
    kind = _kind(a)
    if kind != "other" and kind == _kind(b):
        return (a > b) - (a < b)
    return (left_text > right_text) - (left_text < right_text)


_JSON_ORDER = functools.cmp_to_key(_compare_json)
