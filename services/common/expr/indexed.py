"""Filters answered by scalar indexes instead of a scan of every row.

The planner takes the predicates an index can answer exactly as the scan would (``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=``, ranges, ``in``/``not in``, ``like "prefix%"`` (any
``like`` through an NGRAM index), ``array_contains*``, a BOOL field alone, ``not`` of those),
and combines them:

- ``or`` of answerable parts: the union of their rows;
- ``and`` with at least one answerable part: the rows of its smallest answerable part are the
  candidates, and the scan checks every other part on those rows only (an index narrows, the
  scan finishes): ``id == 7 and title like "%x%"`` reads one row of ``title``;
- anything else: the caller scans.

An index covers the rows ``[0, covered)`` of its store (the growing store's newest rows are
not indexed yet): those rows come from the indexes, the rest from the scan. A selective
filter so costs O(log n + matches). Literal kinds the scan would refuse (``id == "a"``)
and arithmetic are never answered here, so errors come from the scan unchanged; a JSON
path is answered by its own index (a JSON path index), positive predicates only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vectide.services.common.expr.evaluate import (
    FLIPPED,
    SCALAR_KINDS,
    ColumnSource,
    truth_mask,
)
from vectide.services.common.expr.parser import (
    And,
    Compare,
    Expr,
    ExprError,
    Field,
    InList,
    Instant,
    JsonContains,
    Like,
    Literal,
    Not,
    Or,
    PathKey,
    Spatial,
    path_text,
    referenced_fields,
    referenced_paths,
)
from vectide.services.common.msgstream.message import DENSE_VECTORS, FIXED_DTYPES

_EMPTY = np.empty(0, dtype=np.int64)
#: a filter matching more than 1/_WIDE of the rows of numeric fields is scanned instead
_WIDE = 8
#: fields whose scan is a vectorised numpy pass (strings and JSON are compared per row)
_FIXED_WIDTH = frozenset(FIXED_DTYPES) - DENSE_VECTORS


class FieldIndex(Protocol):
    """One field's index over rows ``[0, covered)`` of a store; answers are row numbers."""

    #: "number", "string", "bool", "timestamptz" (scalar fields), "array" (ARRAY elements),
    #: "ngram" or "geometry" (RTREE)
    kind: str
    covered: int
    #: how many rows have a value (``len(present())``, without collecting them)
    present_count: int
    #: answers no negation (a JSON path's: the scan's ``not``, ``not in`` and ``not like``
    #: hold on rows the index lacks)
    positive_only: bool

    def present(self) -> np.ndarray:
        """Rows with a value (not null)."""
        ...

    def compare(self, op: str, value: Any) -> np.ndarray: ...

    def compare_all(self, conditions: Sequence[tuple[str, Any]]) -> np.ndarray:
        """Rows where every ``(op, value)`` holds (``==`` and orderings): a range."""
        ...

    def in_list(self, values: Sequence[Any]) -> np.ndarray: ...

    def prefix(self, prefix: str) -> np.ndarray: ...

    def contains(self, values: Sequence[Any], match_all: bool) -> np.ndarray: ...

    def like(self, pattern: str) -> np.ndarray:
        """Rows a ``like`` pattern matches (an NGRAM index: any pattern)."""
        ...

    def narrows(self, pattern: str) -> bool:
        """Whether ``like`` would look ``pattern`` up rather than match every row."""
        ...

    def spatial(self, op: str, query: Any, distance: float) -> np.ndarray:
        """Rows a GEOMETRY operator holds on (an RTREE index)."""
        ...


def select(
    tree: Expr,
    source: ColumnSource,
    indexes: Mapping[str, FieldIndex],
    scan_wide: bool = True,
) -> np.ndarray | None:
    """Rows of ``source`` (sorted) where ``tree`` is true, found through ``indexes``; None
    when they cannot answer it, or (``scan_wide``) when it matches so many rows of numeric
    fields that a scan is cheaper: the caller scans every row."""
    keys = {index_key(name, path, source) for name, path in referenced_paths(tree)}
    covered = min((indexes[key].covered for key in keys if key in indexes), default=0)
    if not covered:
        return None
    planner = _Planner(source, indexes, min(covered, source.num_rows))
    if not planner.answerable(tree):
        return None
    wide = planner.size(tree) * _WIDE > planner.covered
    if scan_wide and wide and _cheap_to_scan(tree, source):
        return None  # most rows match: numpy's pass over numbers beats collecting them
    try:
        head = planner.true(tree)
        if planner.covered >= source.num_rows:
            return head
        tail = np.arange(planner.covered, source.num_rows, dtype=np.int64)
        return np.concatenate([head, tail[truth_mask(tree, RowsSource(source, tail))]])
    except ExprError as err:
        raise ExprError(f"{err} in expression {tree.text!r}") from err


def index_key(name: str, path: tuple[PathKey, ...], source: ColumnSource) -> str:
    """Which index a field reference would use: a scalar field's own, or a JSON path's
    (a name the schema lacks is a key of the dynamic field, as the scan resolves it)."""
    dynamic = source.dynamic_field
    if dynamic is not None and name != dynamic and source.field_type(name) is None:
        name, path = dynamic, (name, *path)
    return path_text(name, path) if path else name


class RowsSource:
    """Some rows of a source, as a source of their own: the scan's view of candidates."""

    def __init__(self, source: ColumnSource, rows: np.ndarray) -> None:
        self._source = source
        self._rows = rows
        self.num_rows = len(rows)
        self.dynamic_field = source.dynamic_field

    def field_type(self, name: str) -> Any:
        return self._source.field_type(name)

    def column(self, name: str) -> np.ndarray | list:
        values = self._source.column(name)
        if isinstance(values, np.ndarray):
            return values[self._rows]
        return [values[i] for i in self._rows.tolist()]

    def valid(self, name: str) -> np.ndarray | None:
        valid = self._source.valid(name)
        return None if valid is None else np.asarray(valid)[self._rows]

    def text_match(self, name: str, query: str, minimum: int = 1) -> np.ndarray:
        return self._source.text_match(name, query, minimum)[self._rows]

    def phrase_match(self, name: str, query: str, slop: int) -> np.ndarray:
        return self._source.phrase_match(name, query, slop)[self._rows]

    def geometries(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        return self._source.geometries(name, self._rows if rows is None else self._rows[rows])


class _Leaf:
    """A predicate one index answers: its rows, or (negated) the field's other non-null rows."""

    def __init__(
        self,
        index: FieldIndex,
        ask: Callable[[], np.ndarray],
        negated: bool,
        condition: tuple[str, Any] | None = None,
    ) -> None:
        self.index = index
        self.ask = ask
        self.negated = negated
        #: (op, value) of a comparison that may join others on its field into one range
        self.condition = condition if not negated else None
        self._rows: np.ndarray | None = None

    def rows(self) -> np.ndarray:
        """The rows of the positive predicate, unsorted (computed once)."""
        if self._rows is None:
            self._rows = self.ask()
        return self._rows

    def size(self) -> int:
        hits = len(self.rows())
        return self.index.present_count - hits if self.negated else hits


class _Planner:
    def __init__(
        self, source: ColumnSource, indexes: Mapping[str, FieldIndex], covered: int
    ) -> None:
        self.source = source
        self.indexes = indexes
        self.covered = covered
        self._leaves: dict[int, _Leaf | None] = {}

    # -- what the indexes answer

    def answerable(self, node: Expr) -> bool:
        if isinstance(node, Literal):
            return isinstance(node.value, bool)
        if isinstance(node, And):
            return any(self.answerable(op) for op in node.operands)
        if isinstance(node, Or):
            return all(self.answerable(op) for op in node.operands)
        return self.leaf(node) is not None

    def leaf(self, node: Expr) -> _Leaf | None:
        key = id(node)
        if key not in self._leaves:
            leaf = self._match(node)
            if leaf is not None and leaf.negated and leaf.index.positive_only:
                leaf = None
            self._leaves[key] = leaf
        return self._leaves[key]

    def _match(self, node: Expr) -> _Leaf | None:
        if isinstance(node, Not):
            inner = self.leaf(node.operand)
            return None if inner is None else _Leaf(inner.index, inner.ask, not inner.negated)
        match node:
            case Compare(op, Field() as field, Literal() as constant):
                return self._compare(field, op, constant)
            case Compare(op, Literal() as constant, Field() as field):
                return self._compare(field, FLIPPED[op], constant)
            case InList(Field() as field, values, negated):
                index = self._index(field, *(_kind(v) for v in values))
                return (
                    None if index is None else _Leaf(index, lambda: index.in_list(values), negated)
                )
            case Like(Field() as field, pattern, negated):
                return self._like(field, pattern, negated)
            case JsonContains(Field() as field, values, match_all):
                index = self._index(field, "array")
                return (
                    None
                    if index is None
                    else _Leaf(index, lambda: index.contains(values, match_all), False)
                )
            case Spatial(op, Field() as field, query, distance) if op != "st_isvalid":
                index = self._index(field, "geometry")
                return (
                    None
                    if index is None
                    else _Leaf(index, lambda: index.spatial(op, query, distance), False)
                )
            case Field():
                index = self._index(node, "bool")
                return (
                    None
                    if index is None
                    else _Leaf(index, lambda: index.compare("==", True), False)
                )
        return None

    def _compare(self, field: Field, op: str, constant: Literal) -> _Leaf | None:
        value = constant.value
        index = self._index(field, "timestamptz" if isinstance(constant, Instant) else _kind(value))
        if index is None or (index.kind == "bool" and op not in ("==", "!=")):
            return None  # the scan refuses to order booleans
        condition = None if op == "!=" else (op, value)
        return _Leaf(index, lambda: index.compare(op, value), False, condition)

    def _like(self, field: Field, pattern: str, negated: bool) -> _Leaf | None:
        ngrams = self._index(field, "ngram")
        if ngrams is not None:
            if not ngrams.narrows(pattern):
                return None  # no run as long as its n-grams: every row a candidate, scanned
            return _Leaf(ngrams, lambda: ngrams.like(pattern), negated)
        index = self._index(field, "string")
        parsed = _prefix_pattern(pattern)
        if index is None or parsed is None:
            return None
        text, is_prefix = parsed
        if is_prefix:
            return _Leaf(index, lambda: index.prefix(text), negated)
        return _Leaf(index, lambda: index.compare("==", text), negated)

    def _index(self, field: Field, *kinds: str | None) -> FieldIndex | None:
        """The field's index when every literal it is matched with has the index's kind."""
        index = self.indexes.get(index_key(field.name, field.path, self.source))
        if index is None or any(kind != index.kind for kind in kinds):
            return None
        return index

    # -- the rows

    def size(self, node: Expr) -> int:
        """An upper bound of how many rows ``node`` holds on (cheap: no sorting)."""
        if isinstance(node, Literal):
            return self.covered if node.value else 0
        if isinstance(node, And):
            return min(unit.size() for unit in self._units(node))
        if isinstance(node, Or):
            return sum(self.size(op) for op in node.operands)
        leaf = self.leaf(node)
        assert leaf is not None
        return leaf.size()

    def true(self, node: Expr) -> np.ndarray:
        """Sorted rows below ``covered`` where ``node`` is true (``answerable`` nodes)."""
        if isinstance(node, Literal):
            return np.arange(self.covered if node.value else 0, dtype=np.int64)
        if isinstance(node, Or):
            return _sorted(np.concatenate([self.true(op) for op in node.operands]), self.covered)
        if isinstance(node, And):
            return self._and(node)
        leaf = self.leaf(node)
        assert leaf is not None
        if not leaf.negated:
            return _sorted(leaf.rows(), self.covered)
        mask = np.zeros(self.covered + 1, dtype=bool)  # the last slot takes rows past it
        mask[np.minimum(leaf.index.present(), self.covered)] = True
        mask[np.minimum(leaf.rows(), self.covered)] = False
        return np.flatnonzero(mask[:-1])

    def _units(self, node: And) -> list[_Unit]:
        """The answerable parts of an ``and``; comparisons of one field joined as a range."""
        ranges: dict[int, list[tuple[Expr, _Leaf]]] = {}
        units = []
        for op in node.operands:
            leaf = self.leaf(op) if not isinstance(op, (And, Or, Literal)) else None
            if leaf is not None and leaf.condition is not None:
                ranges.setdefault(id(leaf.index), []).append((op, leaf))
            elif self.answerable(op):
                units.append(_Unit((op,), lambda op=op: self.size(op), lambda op=op: self.true(op)))
        for parts in ranges.values():
            ops, index = tuple(op for op, _ in parts), parts[0][1].index
            conditions = [leaf.condition for _, leaf in parts]
            joined = _Leaf(index, lambda i=index, c=conditions: i.compare_all(c), False)
            units.append(_Unit(ops, joined.size, lambda j=joined: _sorted(j.rows(), self.covered)))
        return units

    def _and(self, node: And) -> np.ndarray:
        best = min(self._units(node), key=lambda unit: unit.size())
        candidates = best.rows()
        rest = tuple(op for op in node.operands if all(op is not o for o in best.ops))
        if not rest:
            return candidates
        others = rest[0] if len(rest) == 1 else And(rest, text=node.text)
        return candidates[truth_mask(others, RowsSource(self.source, candidates))]


@dataclass(frozen=True)
class _Unit:
    """Operands of an ``and`` answered together: how many rows at most, and which."""

    ops: tuple[Expr, ...]
    size: Callable[[], int]
    rows: Callable[[], np.ndarray]


def _cheap_to_scan(tree: Expr, source: ColumnSource) -> bool:
    return all(source.field_type(name) in _FIXED_WIDTH for name in referenced_fields(tree))


def _kind(value: object) -> str | None:
    return SCALAR_KINDS.get(type(value))


def _sorted(rows: np.ndarray, covered: int) -> np.ndarray:
    """``rows`` below ``covered``, sorted, each once: by sorting when they are few, through
    a row mask when they are many (linear, and cheaper than sorting most of the rows)."""
    if len(rows) and rows.max() >= covered:
        rows = rows[rows < covered]
    if len(rows) * 8 < covered:
        return np.unique(rows)
    mask = np.zeros(covered, dtype=bool)
    mask[rows] = True
    return np.flatnonzero(mask)


def _prefix_pattern(pattern: str) -> tuple[str, bool] | None:
    """(text, whether a prefix) of a ``like`` pattern an index answers: ``text`` matched
    exactly, or followed by one final ``%``; None for any other wildcard."""
    text, escaped = [], False
    for i, char in enumerate(pattern):
        if escaped:
            if char not in "%_":
                text.append("\\")  # an unknown escape keeps its backslash, as the scan's
            text.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%" and i == len(pattern) - 1:
            return "".join(text), True
        elif char in "%_":
            return None
        else:
            text.append(char)
    if escaped:
        text.append("\\")
    return "".join(text), False
