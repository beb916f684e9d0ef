"""Evaluate a parsed filter expression over columns into a boolean row mask.

Fixed-width columns stay numpy arrays the whole way, so a filter over them costs a few
vectorised passes and no Python work per row. VARCHAR columns become object arrays, which
numpy compares element by element in C. JSON values can only be reached row by row; those
loops are kept to a single comprehension per operation.

JSON semantics follow Milvus: a missing key or a value of the wrong type makes that row false
instead of raising, numbers compare numerically with each other (bool is never a number) and
strings compare with strings.

Nulls follow SQL's three-valued logic, as Milvus's do: a predicate reading a null row of a
nullable field is unknown there, ``not`` keeps it unknown, ``and``/``or`` combine by Kleene's
rules, and only rows where the whole filter is true are selected. ``is null`` is never unknown.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vectide.services.common import geometry
from vectide.services.common.expr.parser import (
    FLIPPED,
    And,
    Arith,
    ArrayLength,
    Compare,
    Exists,
    Expr,
    ExprError,
    Field,
    InList,
    Instant,
    IsNull,
    JsonContains,
    Like,
    Literal,
    Neg,
    Not,
    Or,
    PathKey,
    PhraseMatch,
    Scalar,
    Spatial,
    TextMatch,
    TimeShift,
    referenced_fields,
)
from vectide.services.common.msgstream.message import DENSE_VECTORS, FIXED_DTYPES, DataType


class ColumnSource(Protocol):
    """What the evaluator needs from a segment, a growing buffer or a test fake."""

    num_rows: int
    #: Name of the dynamic JSON field ("$meta"), or None when dynamic fields are disabled.
    dynamic_field: str | None

    def field_type(self, name: str) -> DataType | None: ...

    def column(self, name: str) -> np.ndarray | list: ...

    def valid(self, name: str) -> np.ndarray | None:
        """A nullable field's validity mask (True where the row has a value); None when
        every row has one or ``name`` is not a nullable field."""
        ...

    def text_match(self, name: str, query: str, minimum: int = 1) -> np.ndarray:
        """Rows whose analyzed text in ``name`` holds at least ``minimum`` of ``query``'s
        distinct terms (ExprError when the field does not enable match)."""
        ...

    def phrase_match(self, name: str, query: str, slop: int) -> np.ndarray:
        """Rows whose analyzed text in ``name`` holds ``query``'s terms as a phrase, up to
        ``slop`` position moves (ExprError when the field does not enable match)."""
        ...

    def geometries(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """A GEOMETRY field's rows (only ``rows`` of them, when given) as shapely
        geometries, None where a row is null (``geometry.column`` of its WKT rows; a store
        keeps them parsed)."""
        ...


class _Missing:
    """Marks a JSON path that does not exist in a row; distinct from a JSON null (None)."""

    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()


@dataclass(frozen=True, slots=True)
class _Strings:
    """VARCHAR rows as an object array, which numpy compares element-wise in C."""

    rows: np.ndarray


@dataclass(frozen=True, slots=True)
class _Json:
    """One JSON value per row, ``_MISSING`` where the path does not exist."""

    rows: list[object]


@dataclass(frozen=True, slots=True)
class _Times:
    """TIMESTAMPTZ microseconds (a column, or an ISO literal's one value): their own kind,
    compared only with each other."""

    rows: np.ndarray | int


#: A numeric or BOOL column, VARCHAR rows, JSON rows, instants, or a constant.
_Value = np.ndarray | _Strings | _Json | _Times | Scalar

SCALAR_KINDS: dict[type, str] = {bool: "bool", int: "number", float: "number", str: "string"}
_COMPARE_OPS: dict[str, Callable[[object, object], object]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITH_OPS: dict[str, np.ufunc] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "%": np.fmod,  # C semantics (sign of the dividend), as Milvus computes it
}
_FILTERABLE = frozenset(FIXED_DTYPES) - DENSE_VECTORS
_LIKE_PIECE = re.compile(r"\\[%_]|[%_]|[^%_\\]+|\\")
_LIKE_REGEX = {"%": ".*", "_": ".", "\\%": "%", "\\_": "_"}


def evaluate(tree: Expr, source: ColumnSource) -> np.ndarray:
    """Rows of ``source`` that satisfy ``tree``, as a fresh boolean array the caller may keep
    or modify."""
    try:
        return _Evaluator(source).mask(tree)
    except ExprError as err:
        raise ExprError(f"{err} in expression {tree.text!r}") from err


def truth_mask(tree: Expr, source: ColumnSource) -> np.ndarray:
    """:func:`evaluate` for a part of an expression: its errors do not name the whole one
    (the caller's do)."""
    return _Evaluator(source).mask(tree)


class _Evaluator:
    """Holds the source and a per-evaluation cache, so a field used twice (as in a range) is
    fetched and, for JSON, walked only once."""

    def __init__(self, source: ColumnSource) -> None:
        self.source = source
        self.num_rows = source.num_rows
        self.fields: dict[Field, _Value] = {}
        self.null_rows: dict[str, np.ndarray | None] = {}

    # -- predicates

    def mask(self, node: Expr) -> np.ndarray:
        """Rows where ``node`` is true (not false, not unknown)."""
        return self._truth(node)[0]

    def _truth(self, node: Expr) -> tuple[np.ndarray, np.ndarray]:
        """(rows where ``node`` is true, rows where it is false); the rest are unknown."""
        match node:
            case Not(operand):
                true, false = self._truth(operand)
                return false, true
            case And(operands) | Or(operands):
                parts = [self._truth(operand) for operand in operands]
                trues, falses = [p[0] for p in parts], [p[1] for p in parts]
                if isinstance(node, And):
                    return _all(trues), _any(falses)
                return _any(trues), _all(falses)
        value = self._predicate(node)
        unknown = None if isinstance(node, IsNull | Exists | Literal) else self._nulls_in(node)
        if unknown is None:
            return value, ~value
        return value & ~unknown, ~value & ~unknown

    def _nulls_in(self, node: Expr) -> np.ndarray | None:
        """Rows where some field ``node`` reads is null."""
        masks = [m for name in referenced_fields(node) if (m := self._nulls(name)) is not None]
        return _any(masks) if masks else None

    def _nulls(self, name: str) -> np.ndarray | None:
        if name not in self.null_rows:
            valid = self.source.valid(name)
            self.null_rows[name] = None if valid is None else ~np.asarray(valid, dtype=bool)
        return self.null_rows[name]

    def _predicate(self, node: Expr) -> np.ndarray:
        match node:
            case Literal(bool() as value):
                return np.full(self.num_rows, value, dtype=bool)
            case Field():
                return self._bool_field(node)
            case Compare():
                return self._compare(node)
            case InList(operand, values, negated):
                return self._in_list(self.value(operand), values, negated, node)
            case Like(operand, pattern, negated):
                return self._like(self.value(operand), pattern, negated, node)
            case IsNull(operand, negated):
                return self._is_null(operand, negated)
            case Exists(operand):
                return self._bools(row is not _MISSING for row in self._json(operand, node).rows)
            case JsonContains(operand, values, match_all):
                return self._json_contains(self._json(operand, node), values, match_all)
            case TextMatch(operand, query, minimum) if not operand.path:
                return np.asarray(self.source.text_match(operand.name, query, minimum), bool)
            case PhraseMatch(operand, query, slop) if not operand.path:
                return np.asarray(self.source.phrase_match(operand.name, query, slop), bool)
            case Spatial():
                return self._spatial(node)
            case TimeShift():
                return self._time_shift(node)
        raise ExprError(f"{node.text!r} is not a boolean expression")

    def _time_shift(self, node: TimeShift) -> np.ndarray:
        value = self.field(node.operand)
        if not isinstance(value, _Times):
            raise ExprError(f"field '{node.operand.name}' is not a timestamptz datatype")
        shifted = node.interval.shift(value.rows, node.sign)
        return np.asarray(_COMPARE_OPS[node.op](shifted, node.instant), dtype=bool)

    def _spatial(self, node: Spatial) -> np.ndarray:
        if not self._is_geometry(node.operand):
            raise ExprError(f"{node.op} needs a GEOMETRY field: {node.text!r}")
        rows = self.source.geometries(node.operand.name)
        return geometry.evaluate(node.op, rows, node.query, node.distance)

    def _is_geometry(self, node: Field) -> bool:
        return not node.path and self.source.field_type(node.name) == DataType.GEOMETRY

    def _bool_field(self, node: Field) -> np.ndarray:
        value = self.field(node)
        if isinstance(value, _Json):
            return self._bools(row is True for row in value.rows)
        if isinstance(value, np.ndarray) and value.dtype == bool:
            return value.copy()
        raise ExprError(f"{node.text!r} is not a boolean field")

    def _compare(self, node: Compare) -> np.ndarray:
        left, right, op = self.value(node.left), self.value(node.right), node.op
        if isinstance(left, _Times) != isinstance(right, _Times):
            raise ExprError(
                f"cannot compare {node.left.text!r} with {node.right.text!r}: TIMESTAMPTZ "
                "fields and ISO '...' literals compare only with each other"
            )
        ordered = op not in ("==", "!=")
        if isinstance(right, _Json) and not isinstance(left, _Json):
            left, right, op = right, left, FLIPPED[op]
        if isinstance(left, _Json):
            if isinstance(right, bool) and ordered:
                raise ExprError(f"booleans cannot be ordered: {node.text!r}")
            return self._json_compare(_COMPARE_OPS[op], ordered, left, right)
        left_kind, right_kind = _kind(left), _kind(right)
        if left_kind != right_kind:
            raise ExprError(
                f"cannot compare {node.left.text!r} ({left_kind}) "
                f"with {node.right.text!r} ({right_kind})"
            )
        if left_kind == "bool" and ordered:
            raise ExprError(f"booleans cannot be ordered: {node.text!r}")
        return np.asarray(_COMPARE_OPS[op](_data(left), _data(right)), dtype=bool)

    def _json_compare(
        self, compare: Callable[[object, object], object], ordered: bool, left: _Json, right: _Value
    ) -> np.ndarray:
        if not isinstance(right, (np.ndarray, _Strings, _Json)):
            kind = SCALAR_KINDS[type(right)]
            return self._bools(
                SCALAR_KINDS.get(type(row)) == kind and bool(compare(row, right))
                for row in left.rows
            )
        pairs = zip(left.rows, self._rows(right), strict=True)
        return self._bools(_json_match(compare, ordered, a, b) for a, b in pairs)

    def _in_list(
        self, value: _Value, values: tuple[Scalar, ...], negated: bool, node: InList
    ) -> np.ndarray:
        if isinstance(value, _Json):
            wanted = {json_key(item) for item in values}
            return self._bools(
                (key := json_key(row)) is not None and (key in wanted) != negated
                for row in value.rows
            )
        kind = _kind(value)
        if kind == "timestamptz":
            raise ExprError(f"a TIMESTAMPTZ field compares with ISO '...' literals: {node.text!r}")
        if any(SCALAR_KINDS[type(item)] != kind for item in values):
            raise ExprError(f"list values must all be of type {kind}: {node.text!r}")
        if isinstance(value, _Strings):
            hits = self._bools(map(frozenset(values).__contains__, value.rows))
        else:
            hits = np.isin(value, _list_array(values, value.dtype))
        return ~hits if negated else hits

    def _like(self, value: _Value, pattern: str, negated: bool, node: Like) -> np.ndarray:
        regex = like_regex(pattern)
        if isinstance(value, _Strings):
            hits = self._bools(map(bool, map(regex.fullmatch, value.rows)))
            return ~hits if negated else hits
        if isinstance(value, _Json):
            return self._bools(
                type(row) is str and (regex.fullmatch(row) is not None) != negated
                for row in value.rows
            )
        raise ExprError(f"'like' needs a VARCHAR or JSON string: {node.text!r}")

    def _is_null(self, operand: Field, negated: bool) -> np.ndarray:
        """A JSON value is null when it is JSON null or missing; another field's row is null
        when its validity mask says so (a field that is not nullable has no null row)."""
        value = None if self._is_geometry(operand) else self.field(operand)
        if not isinstance(value, _Json):
            nulls = self._nulls(operand.name)
            if nulls is None:
                return np.full(self.num_rows, negated, dtype=bool)
            return ~nulls if negated else nulls.copy()
        return self._bools((row is None or row is _MISSING) != negated for row in value.rows)

    def _json_contains(
        self, value: _Json, values: tuple[Scalar, ...], match_all: bool
    ) -> np.ndarray:
        wanted = frozenset(json_key(item) for item in values)

        def contains(row: object) -> bool:
            if type(row) is not list:
                return False
            present = {json_key(item) for item in row}
            return wanted <= present if match_all else not wanted.isdisjoint(present)

        return self._bools(map(contains, value.rows))

    # -- values

    def value(self, node: Expr) -> _Value:
        match node:
            case Instant(value):
                return _Times(value)
            case Literal(value) if not isinstance(value, tuple):
                return value
            case Field():
                return self.field(node)
            case Neg(operand):
                return self._arithmetic("-", 0, self.value(operand), node)
            case Arith(op, left, right):
                return self._arithmetic(op, self.value(left), self.value(right), node)
            case ArrayLength(operand):
                rows = self._json(operand, node).rows
                return _Json([len(row) if type(row) is list else _MISSING for row in rows])
        raise ExprError(f"{node.text!r} is not a value")

    def field(self, node: Field) -> _Value:
        if node not in self.fields:
            self.fields[node] = self._resolve(node)
        return self.fields[node]

    def _resolve(self, node: Field) -> _Value:
        """A name the schema lacks is a key of the dynamic field, as in Milvus."""
        dynamic = self.source.dynamic_field
        data_type = DataType.JSON if node.name == dynamic else self.source.field_type(node.name)
        if data_type is None and dynamic is not None:
            return self._json_path(dynamic, (node.name, *node.path))
        if data_type is None:
            raise ExprError(f"field {node.name} not exist")
        if data_type in (DataType.JSON, DataType.ARRAY):  # an ARRAY row is a JSON list
            return self._json_path(node.name, node.path)
        if node.path:
            raise ExprError(f"{data_type.name} field {node.name} has no JSON path: {node.text!r}")
        if data_type == DataType.VARCHAR:
            return _Strings(np.asarray(self.source.column(node.name), dtype=object))
        if data_type == DataType.TIMESTAMPTZ:
            return _Times(np.asarray(self.source.column(node.name), dtype=np.int64))
        if data_type in _FILTERABLE:
            return np.asarray(self.source.column(node.name), dtype=FIXED_DTYPES[data_type])
        raise ExprError(f"{data_type.name} field {node.name} cannot be used in a filter")

    def _json_path(self, name: str, path: tuple[PathKey, ...]) -> _Json:
        documents = self.source.column(name)
        if not path:
            return _Json(list(documents))
        return _Json([lookup_path(document, path) for document in documents])

    def _json(self, node: Field, context: Expr) -> _Json:
        value = self.field(node)
        if not isinstance(value, _Json):
            raise ExprError(f"{node.text!r} is not a JSON field or path: {context.text!r}")
        return value

    def _arithmetic(self, op: str, left: _Value, right: _Value, node: Expr) -> _Value:
        for operand in (left, right):
            if not isinstance(operand, _Json) and _kind(operand) != "number":
                raise ExprError(f"arithmetic needs numbers, got a {_kind(operand)}: {node.text!r}")
        if isinstance(left, _Json) or isinstance(right, _Json):
            pairs = zip(self._rows(left), self._rows(right), strict=True)
            return _Json([_row_arithmetic(op, a, b) for a, b in pairs])
        if op in ("/", "%") and not isinstance(right, np.ndarray) and right == 0:
            raise ExprError(f"division by zero: {node.text!r}")
        try:
            result = _apply(op, _widen(left), _widen(right))
        except OverflowError as err:
            raise ExprError(f"integer out of range in {node.text!r}") from err
        return result.item() if isinstance(result, np.generic) else result

    # -- helpers

    def _rows(self, value: _Value) -> Iterable[object]:
        """Any value as one Python object per row, for the JSON loops."""
        if isinstance(value, (_Json, _Strings)):
            return value.rows
        if isinstance(value, np.ndarray):
            return value.tolist()
        return itertools.repeat(value, self.num_rows)

    def _bools(self, rows: Iterable[object]) -> np.ndarray:
        return np.fromiter(rows, dtype=bool, count=self.num_rows)


def _all(masks: list[np.ndarray]) -> np.ndarray:
    return functools.reduce(operator.and_, masks)


def _any(masks: list[np.ndarray]) -> np.ndarray:
    return functools.reduce(operator.or_, masks)


def lookup_path(document: Any, path: tuple[PathKey, ...]) -> object:
    """The value at ``path`` in a JSON document, ``MISSING`` where it has none."""
    for key in path:
        if not _has_key(document, key):
            return _MISSING
        document = document[key]
    return document


def _has_key(document: object, key: PathKey) -> bool:
    """Exact types: JSON parsers only build dict and list, and a str must not be indexed."""
    if isinstance(key, str):
        return type(document) is dict and key in document
    return type(document) is list and key < len(document)


def _kind(value: np.ndarray | _Strings | _Times | Scalar) -> str:
    """JSON values have no single kind; callers handle them row by row before asking."""
    if isinstance(value, np.ndarray):
        return "bool" if value.dtype == bool else "number"
    if isinstance(value, _Strings):
        return "string"
    if isinstance(value, _Times):
        return "timestamptz"
    return SCALAR_KINDS[type(value)]


def _data(value: _Value) -> object:
    return value.rows if isinstance(value, (_Strings, _Times)) else value


def _list_array(values: tuple[Scalar, ...], dtype: np.dtype) -> np.ndarray:
    """Floats are rounded to the column's precision, so that ``score in [0.1]`` agrees with
    ``score == 0.1`` on a FLOAT column; integer columns keep the values exact."""
    return np.asarray(values, dtype=dtype if dtype.kind == "f" else None)


def json_key(value: object) -> tuple[str, object] | None:
    """Hashable identity that keeps ``True`` apart from ``1`` but ``1`` equal to ``1.0``."""
    kind = SCALAR_KINDS.get(type(value))
    return None if kind is None else (kind, value)


def _json_match(
    compare: Callable[[object, object], object], ordered: bool, left: object, right: object
) -> bool:
    kind = SCALAR_KINDS.get(type(left))
    if kind is None or kind != SCALAR_KINDS.get(type(right)):
        return False
    return not (ordered and kind == "bool") and bool(compare(left, right))


def _row_arithmetic(op: str, left: object, right: object) -> object:
    numbers = SCALAR_KINDS.get(type(left)) == SCALAR_KINDS.get(type(right)) == "number"
    if not numbers or (op in ("/", "%") and right == 0):
        return _MISSING
    try:
        return _apply(op, left, right).item()
    except OverflowError:
        return _MISSING


def _widen(value: _Value) -> _Value:
    """Small integer columns are widened so ``int8_field * 100`` does not wrap around."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return value.astype(np.int64, copy=False)
    return value


def _apply(op: str, left: object, right: object) -> Any:
    with np.errstate(all="ignore"):
        return _divide(left, right) if op == "/" else _ARITH_OPS[op](left, right)


def _divide(left: Any, right: Any) -> Any:
    """Milvus divides integers the C way, truncating toward zero rather than flooring."""
    if np.result_type(left, right).kind not in "iu":
        return np.true_divide(left, right)
    quotient = np.floor_divide(left, right)
    return quotient + ((quotient < 0) & (quotient * right != left))


def like_literals(pattern: str) -> list[str]:
    """The runs of literal characters of a ``like`` pattern, between its wildcards: every
    text the pattern matches holds each of them (what an n-gram index looks up)."""
    runs, current = [], ""
    for piece in _LIKE_PIECE.findall(pattern):
        if piece in ("%", "_"):
            runs.append(current)
            current = ""
        else:
            current += piece[1:] if piece in ("\\%", "\\_") else piece
    return [run for run in [*runs, current] if run]


def like_regex(pattern: str) -> re.Pattern[str]:
    """``%`` is any run and ``_`` one character; ``\\%`` and ``\\_`` are the characters."""
    pieces = _LIKE_PIECE.findall(pattern)
    return re.compile(
        "".join(_LIKE_REGEX.get(piece) or re.escape(piece) for piece in pieces), re.DOTALL
    )
