"""Tokenizer and recursive-descent parser for Milvus boolean filter expressions.

Parsing needs no schema, so it only checks the shape of an expression (a predicate where a
predicate belongs, a value where a value belongs); type checks against the columns happen in
:mod:`services.common.expr.evaluate`. Every node keeps the source text it came from so that
those later errors can point at the offending piece of the expression.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple, TypeGuard

from vectide.services.common import geometry, timestamptz

Scalar = bool | int | float | str
PathKey = str | int


class ExprError(ValueError):
    """A filter expression that cannot be parsed or evaluated against a schema."""


# --------------------------------------------------------------------------------- AST nodes


@dataclass(frozen=True, slots=True)
class Expr:
    """Base of every node; ``text`` is excluded from equality so trees compare structurally."""

    text: str = field(default="", kw_only=True, compare=False, repr=False)

    def children(self) -> Iterator[Expr]:
        """Sub-expressions, found generically so tree walkers need no per-node code."""
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, Expr):
                yield value
            elif isinstance(value, tuple):
                yield from (item for item in value if isinstance(item, Expr))


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    """A constant; a tuple value is a list literal, only legal after ``in`` or as an argument."""

    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Instant(Literal):
    """``ISO '2025-01-03T00:00:00+08:00'``: a TIMESTAMPTZ constant, as microseconds since the
    epoch (a text without an offset is in the read's zone). It compares with TIMESTAMPTZ
    fields only, and they with it only."""


@dataclass(frozen=True, slots=True)
class IntervalLiteral(Expr):
    """``INTERVAL 'P1DT2H'``: only ever the right operand of a TIMESTAMPTZ field's ``+`` or
    ``-`` in a comparison with an ISO literal (which then becomes a :class:`TimeShift`)."""

    interval: timestamptz.Interval


@dataclass(frozen=True, slots=True)
class Field(Expr):
    """A field, optionally followed by a JSON path (``meta["a"][0]``).

    Whether ``name`` is a schema field or a key of the dynamic field is only known at
    evaluation time, so the parser keeps the name exactly as written.
    """

    name: str
    path: tuple[PathKey, ...] = ()


@dataclass(frozen=True, slots=True)
class Neg(Expr):
    operand: Expr


@dataclass(frozen=True, slots=True)
class Arith(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class InList(Expr):
    operand: Expr
    values: tuple[Scalar, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Expr):
    operand: Expr
    pattern: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    operand: Field
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Exists(Expr):
    operand: Field


@dataclass(frozen=True, slots=True)
class JsonContains(Expr):
    """``json_contains`` is stored as ``json_contains_all`` with one value: same semantics."""

    operand: Field
    values: tuple[Scalar, ...]
    match_all: bool


@dataclass(frozen=True, slots=True)
class ArrayLength(Expr):
    operand: Field


@dataclass(frozen=True, slots=True)
class TextMatch(Expr):
    """``text_match(field, 'words'[, minimum_should_match=n])``: rows whose analyzed text
    holds at least ``minimum`` of the words' distinct terms (the source analyzes, with the
    field's analyzer)."""

    operand: Field
    query: str
    minimum: int = 1


@dataclass(frozen=True, slots=True)
class PhraseMatch(Expr):
    """``phrase_match(field, 'words'[, slop])``: rows whose analyzed text holds the words'
    terms in order and adjacent, up to ``slop`` position moves (``services.common.phrase``)."""

    operand: Field
    query: str
    slop: int = 0


@dataclass(frozen=True, slots=True)
class Spatial(Expr):
    """A GEOMETRY operator (Milvus 2.6.4): ``st_contains(field, 'wkt')`` and the other
    relations, ``st_dwithin(field, 'POINT (lon lat)', meters)``, ``st_isvalid(field)``
    (``services.common.geometry``). ``op`` is the function's lower-case name; ``query`` the
    WKT parsed once, here (None for ``st_isvalid``)."""

    op: str
    operand: Field
    query: geometry.Geometry | None = None
    distance: float = 0.0


@dataclass(frozen=True, slots=True)
class TimeShift(Expr):
    """``field + INTERVAL 'P1M' >= ISO '...'`` (or ``-``; or the ISO literal first, its
    operator then flipped): each row's instant moved by ``sign`` times ``interval`` in the
    UTC calendar (``timestamptz.Interval.shift``), compared with ``instant``."""

    op: str
    operand: Field
    interval: timestamptz.Interval
    sign: int
    instant: int


@dataclass(frozen=True, slots=True)
class RandomSample(Expr):
    """``random_sample(factor)`` (Milvus 2.6): of the rows the rest of the filter keeps, a
    random ``factor`` of each segment. Only the whole filter or the last condition of its
    top-level ``and`` (:func:`split_sample`); readers take it off the tree before evaluating."""

    factor: float


@dataclass(frozen=True, slots=True)
class Not(Expr):
    operand: Expr


@dataclass(frozen=True, slots=True)
class And(Expr):
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or(Expr):
    operands: tuple[Expr, ...]


#: Nodes that can only stand where a boolean is expected. A Field (a BOOL column) and a
#: boolean Literal can stand in both places.
_PREDICATES = (
    Compare,
    InList,
    Like,
    IsNull,
    Exists,
    JsonContains,
    TextMatch,
    PhraseMatch,
    Spatial,
    TimeShift,
    RandomSample,
    Not,
    And,
    Or,
)


# --------------------------------------------------------------------------------- tokenizer


class _Token(NamedTuple):
    kind: str
    text: str
    pos: int
    end: int


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
    | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
    | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<param>\{\s*[A-Za-z_]\w*\s*\})
    | (?P<name>\$?[A-Za-z_]\w*)
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>+\-*/%!()\[\],=])
    """,
    re.VERBOSE | re.DOTALL,
)

_KEYWORDS = frozenset({"and", "or", "not", "in", "like", "exists", "is", "null", "true", "false"})
_SYMBOL_ALIASES = {"&&": "and", "||": "or", "!": "not"}
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
#: a comparison with its sides swapped (``5 < x`` is ``x > 5``)
FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


def _tokenize(text: str) -> list[_Token]:
    """Keywords and symbol aliases are normalised into the token kind, so the parser only
    ever asks about ``and``/``or``/``not`` whatever spelling the user chose."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            what = "unterminated string" if text[pos] in "\"'" else f"unexpected {text[pos]!r}"
            raise _syntax_error(text, what, pos)
        kind, lexeme = match.lastgroup or "", match.group()
        if kind == "name" and lexeme.lower() in _KEYWORDS:
            kind = lexeme.lower()
        elif kind == "op":
            kind = _SYMBOL_ALIASES.get(lexeme, lexeme)
        if kind != "ws":
            tokens.append(_Token(kind, lexeme, pos, match.end()))
        pos = match.end()
    tokens.append(_Token("eof", "", len(text), len(text)))
    return tokens


def _describe(token: _Token) -> str:
    return "end of expression" if token.kind == "eof" else repr(token.text)


def _unquote(lexeme: str) -> str:
    """Unknown escapes keep their backslash so that ``\\%`` and ``\\_`` reach LIKE intact."""

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, match.group(0))

    return _ESCAPE_RE.sub(replace, lexeme[1:-1])


def _syntax_error(text: str, message: str, pos: int) -> ExprError:
    return ExprError(f"{message} at position {pos} in expression {text!r}")


# ------------------------------------------------------------------------------------ parser


class _Parser:
    """One instance per expression; precedence climbs or -> and -> not -> comparison ->
    additive -> multiplicative -> unary minus -> postfix subscripts -> primary."""

    def __init__(self, text: str, params: Mapping[str, object] | None, zone: str) -> None:
        self.text = text
        self.params = params or {}
        self.zone = zone
        self.tokens = _tokenize(text)
        self.index = 0

    # -- token helpers

    def _peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def _next(self) -> _Token:
        token = self._peek()
        self.index += 1
        return token

    def _accept(self, kind: str) -> bool:
        if self._peek().kind != kind:
            return False
        self.index += 1
        return True

    def _expect(self, kind: str) -> _Token:
        token = self._peek()
        if token.kind != kind:
            raise self._error(f"expected {kind!r} but found {_describe(token)}", token.pos)
        return self._next()

    def _error(self, message: str, pos: int) -> ExprError:
        return _syntax_error(self.text, message, pos)

    def _span(self, start: int) -> str:
        """Source text from ``start`` to the end of the last consumed token."""
        return self.text[start : self.tokens[self.index - 1].end]

    # -- shape checks

    def _predicate(self, node: Expr, start: int) -> Expr:
        if isinstance(node, (*_PREDICATES, Field)) or _is_bool_literal(node):
            return node
        raise self._error(f"expected a boolean expression, got {node.text!r}", start)

    def _value(self, node: Expr, start: int) -> Expr:
        if isinstance(node, _PREDICATES):
            raise self._error(f"expected a value, got the condition {node.text!r}", start)
        if isinstance(node, Literal) and isinstance(node.value, tuple):
            raise self._error("a list is only allowed after 'in' or as an argument", start)
        return node

    # -- grammar

    def parse(self) -> Expr:
        if self._peek().kind == "eof":
            return Literal(True, text=self.text)
        start = self._peek().pos
        node = self._predicate(self._or(), start)
        token = self._peek()
        if token.kind != "eof":
            hint = " (did you mean '=='?)" if token.kind == "=" else ""
            raise self._error(f"unexpected {_describe(token)}{hint}", token.pos)
        if _holds(node, IntervalLiteral):
            raise ExprError(
                "INTERVAL can only follow a TIMESTAMPTZ field's + or - in a comparison with an "
                f"ISO literal (tsz + INTERVAL 'P1D' > ISO '...') in expression {self.text!r}"
            )
        predicate, _ = split_sample(node)
        if predicate is not None and _holds(predicate, RandomSample):
            raise ExprError(
                "random_sample can only be the last condition of the filter's top-level "
                f"'and' in expression {self.text!r}"
            )
        return node

    def _boolean_chain(self, keyword: str, operand: Callable[[], Expr]) -> Expr:
        """Flat n-ary and/or: evaluation and pk_terms then need no recursion per operator."""
        start = self._peek().pos
        first = operand()
        if self._peek().kind != keyword:
            return first
        items = [self._predicate(first, start)]
        while self._accept(keyword):
            item_start = self._peek().pos
            items.append(self._predicate(operand(), item_start))
        node_type = And if keyword == "and" else Or
        return node_type(tuple(items), text=self._span(start))

    def _or(self) -> Expr:
        return self._boolean_chain("or", self._and)

    def _and(self) -> Expr:
        return self._boolean_chain("and", self._not)

    def _not(self) -> Expr:
        start = self._peek().pos
        if not self._accept("not"):
            return self._condition()
        operand_start = self._peek().pos
        operand = self._predicate(self._not(), operand_start)
        return Not(operand, text=self._span(start))

    def _condition(self) -> Expr:
        start = self._peek().pos
        if self._accept("exists"):
            return Exists(self._field_operand(), text=self._span(start))
        left = self._sum()
        kind = self._peek().kind
        negated = kind == "not" and self._peek(1).kind in ("in", "like")
        if negated:
            self._next()
            kind = self._peek().kind
        if kind == "in":
            return self._in_list(self._field_value(left, start), negated, start)
        if kind == "like":
            return self._like(self._field_value(left, start), negated, start)
        if kind == "is":
            return self._is_null(left, start)
        if kind in _COMPARISONS:
            return self._comparison(left, start)
        return left

    def _in_list(self, operand: Expr, negated: bool, start: int) -> Expr:
        self._expect("in")
        values = self._list_argument("'in' needs a list")
        return InList(operand, values, negated, text=self._span(start))

    def _like(self, operand: Expr, negated: bool, start: int) -> Expr:
        self._expect("like")
        pattern_pos = self._peek().pos
        pattern = self._primary()
        if not (isinstance(pattern, Literal) and isinstance(pattern.value, str)):
            raise self._error("'like' needs a string pattern", pattern_pos)
        return Like(operand, pattern.value, negated, text=self._span(start))

    def _is_null(self, operand: Expr, start: int) -> Expr:
        self._expect("is")
        negated = self._accept("not")
        self._expect("null")
        if not isinstance(operand, Field):
            raise self._error("'is null' needs a field", start)
        return IsNull(operand, negated, text=self._span(start))

    def _comparison(self, left: Expr, start: int) -> Expr:
        op = self._next().kind
        middle_start = self._peek().pos
        middle = self._value(self._sum(), middle_start)
        first = self._compare(op, self._value(left, start), middle, start)
        if self._peek().kind not in _COMPARISONS:
            return first
        second_op = self._next().kind
        if _direction(op) is None or _direction(op) != _direction(second_op):
            raise self._error("a range needs two '<'/'<=' or two '>'/'>='", middle_start)
        right_start = self._peek().pos
        right = self._value(self._sum(), right_start)
        second = self._compare(second_op, middle, right, middle_start)
        return And((first, second), text=self._span(start))

    def _compare(self, op: str, left: Expr, right: Expr, start: int) -> Compare | TimeShift:
        if _is_constant(left) and _is_constant(right):
            raise self._error("a comparison needs a field on at least one side", start)
        text = self._span(start)
        for shifted, instant, shift_op in ((left, right, op), (right, left, FLIPPED[op])):
            match shifted, instant:
                case Arith(("+" | "-") as sign, Field() as operand, IntervalLiteral(interval)), (
                    Instant(micros)
                ):
                    return TimeShift(
                        shift_op, operand, interval, 1 if sign == "+" else -1, micros, text=text
                    )
        return Compare(op, left, right, text=text)

    def _sum(self) -> Expr:
        return self._arithmetic(("+", "-"), self._term)

    def _term(self) -> Expr:
        return self._arithmetic(("*", "/", "%"), self._unary)

    def _arithmetic(self, ops: tuple[str, ...], operand: Callable[[], Expr]) -> Expr:
        start = self._peek().pos
        node = operand()
        while self._peek().kind in ops:
            op = self._next().kind
            right_start = self._peek().pos
            right = self._number_operand(operand(), right_start)
            node = Arith(op, self._number_operand(node, start), right, text=self._span(start))
        return node

    def _field_value(self, node: Expr, start: int) -> Expr:
        node = self._value(node, start)
        if _is_constant(node):
            raise self._error(f"expected a field, got the constant {node.text!r}", start)
        return node

    def _number_operand(self, node: Expr, start: int) -> Expr:
        node = self._value(node, start)
        if isinstance(node, Literal) and not _is_number(node.value):
            raise self._error(f"arithmetic needs numbers, got {node.text!r}", start)
        return node

    def _unary(self) -> Expr:
        start = self._peek().pos
        if not self._accept("-"):
            return self._postfix()
        operand_start = self._peek().pos
        operand = self._number_operand(self._unary(), operand_start)
        text = self._span(start)
        if isinstance(operand, Literal) and _is_number(operand.value):
            return Literal(-operand.value, text=text)
        return Neg(operand, text=text)

    def _postfix(self) -> Expr:
        start = self._peek().pos
        node = self._primary()
        while self._peek().kind == "[":
            if not isinstance(node, Field):
                raise self._error("only fields can be indexed with [...]", start)
            self._next()
            key = self._path_key()
            self._expect("]")
            node = Field(node.name, (*node.path, key), text=self._span(start))
        return node

    def _path_key(self) -> PathKey:
        pos = self._peek().pos
        key = self._unary()
        if isinstance(key, Literal) and isinstance(key.value, str):
            return key.value
        if isinstance(key, Literal) and _is_integer(key.value) and key.value >= 0:
            return key.value
        raise self._error("a JSON path key must be a string or a non-negative integer", pos)

    def _primary(self) -> Expr:
        token = self._next()
        if token.kind == "(":
            node = self._or()
            self._expect(")")
            return node
        if token.kind == "name" and self._peek().kind == "(":
            return self._call(token)
        if token.kind == "name" and self._peek().kind == "str":
            return self._typed_literal(token)
        if token.kind == "name":
            return Field(token.text, text=token.text)
        if token.kind == "[":
            return Literal(self._list_rest(token.pos), text=self._span(token.pos))
        return Literal(self._constant(token), text=token.text)

    def _typed_literal(self, keyword: _Token) -> Expr:
        """``ISO '...'`` or ``INTERVAL '...'`` (any case; a field may still be named so)."""
        token = self._next()
        text, kind = _unquote(token.text), keyword.text.lower()
        try:
            if kind == "iso":
                return Instant(timestamptz.parse(text, self.zone), text=self._span(keyword.pos))
            if kind == "interval":
                interval = timestamptz.Interval.parse(text)
                return IntervalLiteral(interval, text=self._span(keyword.pos))
        except timestamptz.TimestamptzError as exc:
            raise self._error(str(exc), token.pos) from None
        raise self._error(f"unexpected string after {keyword.text!r}", token.pos)

    def _constant(self, token: _Token) -> Scalar | tuple[Scalar, ...]:
        if token.kind == "num":
            is_float = any(mark in token.text for mark in ".eE")
            return float(token.text) if is_float else int(token.text)
        if token.kind == "str":
            return _unquote(token.text)
        if token.kind in ("true", "false"):
            return token.kind == "true"
        if token.kind == "param":
            return self._param(token)
        raise self._error(f"unexpected {_describe(token)}", token.pos)

    def _param(self, token: _Token) -> Scalar | tuple[Scalar, ...]:
        name = token.text[1:-1].strip()
        if name not in self.params:
            raise self._error(f"unknown placeholder {{{name}}}", token.pos)
        value = self.params[name]
        if isinstance(value, (list, tuple)) and all(_is_scalar(item) for item in value):
            return tuple(value)
        if _is_scalar(value):
            return value
        raise self._error(f"placeholder {{{name}}} must be a scalar or a list", token.pos)

    def _list_rest(self, start: int) -> tuple[Scalar, ...]:
        """Elements after an opening '['; a trailing comma is accepted like Milvus does."""
        items: list[Scalar] = []
        while not self._accept("]"):
            item_pos = self._peek().pos
            item = self._unary()
            if not (isinstance(item, Literal) and _is_scalar(item.value)):
                raise self._error("list elements must be constants", item_pos)
            items.append(item.value)
            if self._peek().kind != "]":
                self._expect(",")
        return tuple(items)

    def _list_argument(self, message: str) -> tuple[Scalar, ...]:
        pos = self._peek().pos
        node = self._primary()
        if isinstance(node, Literal) and isinstance(node.value, tuple):
            return node.value
        raise self._error(message, pos)

    def _scalar_argument(self, message: str) -> Scalar:
        pos = self._peek().pos
        node = self._unary()
        if isinstance(node, Literal) and _is_scalar(node.value):
            return node.value
        raise self._error(message, pos)

    def _field_operand(self) -> Field:
        pos = self._peek().pos
        node = self._postfix()
        if isinstance(node, Field):
            return node
        raise self._error(f"expected a field, got {node.text!r}", pos)

    def _call(self, name_token: _Token) -> Expr:
        name = name_token.text.lower()
        if name not in _FUNCTIONS and name != "random_sample":
            raise self._error(f"unknown function {name_token.text!r}", name_token.pos)
        self._expect("(")
        if name == "random_sample":  # the one function of no field
            node = self._random_sample()
        else:
            node = _FUNCTIONS[name](self, self._field_operand())
        self._expect(")")
        return replace(node, text=self._span(name_token.pos))

    def _random_sample(self) -> Expr:
        pos = self._peek().pos
        factor = self._scalar_argument("random_sample needs a constant sample factor")
        if not _is_number(factor) or not _SAMPLE_EPSILON < factor < 1 - _SAMPLE_EPSILON:
            raise self._error(
                f"the sample factor should be between 0 and 1 (both excluded), got {factor!r}",
                pos,
            )
        return RandomSample(float(factor))

    def _json_contains(self, operand: Field) -> Expr:
        self._expect(",")
        value = self._scalar_argument("json_contains needs a constant as its second argument")
        return JsonContains(operand, (value,), match_all=True)

    def _json_contains_all(self, operand: Field) -> Expr:
        self._expect(",")
        return JsonContains(operand, self._list_argument("json_contains_all needs a list"), True)

    def _json_contains_any(self, operand: Field) -> Expr:
        self._expect(",")
        return JsonContains(operand, self._list_argument("json_contains_any needs a list"), False)

    def _array_length(self, operand: Field) -> Expr:
        return ArrayLength(operand)

    def _text_match(self, operand: Field) -> Expr:
        query = self._query_argument("text_match")
        if not self._accept(","):
            return TextMatch(operand, query)
        option = self._expect("name")
        if option.text.lower() != "minimum_should_match":
            raise self._error(
                f"text_match takes minimum_should_match=<n>, not {option.text!r}", option.pos
            )
        self._expect("=")
        minimum = self._integer_argument("minimum_should_match", 1, 1000)
        return TextMatch(operand, query, minimum)

    def _phrase_match(self, operand: Field) -> Expr:
        query = self._query_argument("phrase_match")
        slop = self._integer_argument("slop", 0, _MAX_SLOP) if self._accept(",") else 0
        return PhraseMatch(operand, query, slop)

    def _spatial(self, operand: Field, op: str) -> Expr:
        wkt = self._query_argument(op)
        pos = self.tokens[self.index - 1].pos
        try:
            query = geometry.parse(wkt)
        except geometry.GeometryError as exc:
            raise self._error(f"{op} needs a valid WKT geometry: {exc}", pos) from None
        if op != "st_dwithin":
            return Spatial(op, operand, query)
        if query.geom_type != "Point":
            raise self._error(f"st_dwithin needs a POINT, got {query.geom_type.upper()}", pos)
        self._expect(",")
        pos = self._peek().pos
        meters = self._scalar_argument("st_dwithin needs a constant distance in meters")
        if not _is_number(meters) or meters < 0:
            raise self._error(
                f"st_dwithin needs a distance of 0 meters or more, got {meters!r}", pos
            )
        return Spatial(op, operand, query, float(meters))

    def _st_isvalid(self, operand: Field) -> Expr:
        return Spatial("st_isvalid", operand)

    def _query_argument(self, function: str) -> str:
        self._expect(",")
        pos = self._peek().pos
        query = self._scalar_argument(f"{function} needs a string as its second argument")
        if not isinstance(query, str):
            raise self._error(f"{function} needs a string as its second argument", pos)
        return query

    def _integer_argument(self, name: str, least: int, most: int) -> int:
        """A constant (or template) integer in ``[least, most]``, as Milvus checks it."""
        pos = self._peek().pos
        value = self._scalar_argument(f"{name} must be a constant integer")
        if not _is_integer(value):
            raise self._error(f"{name} must be a constant integer, got {value!r}", pos)
        if not least <= value <= most:
            raise self._error(f"{name} must be in [{least}, {most}], got {value}", pos)
        return value


_FUNCTIONS: dict[str, Callable[[_Parser, Field], Expr]] = {
    "json_contains": _Parser._json_contains,
    "json_contains_all": _Parser._json_contains_all,
    "json_contains_any": _Parser._json_contains_any,
    "array_length": _Parser._array_length,
    # ARRAY fields are filtered as JSON lists: Milvus's array_contains* mean the same
    "array_contains": _Parser._json_contains,
    "array_contains_all": _Parser._json_contains_all,
    "array_contains_any": _Parser._json_contains_any,
    "text_match": _Parser._text_match,
    "phrase_match": _Parser._phrase_match,
    **{
        op: (lambda parser, operand, op=op: parser._spatial(operand, op))
        for op in (*geometry.RELATIONS, "st_dwithin")
    },
    "st_isvalid": _Parser._st_isvalid,
}
#: Milvus keeps a slop in a uint32
_MAX_SLOP = 2**32 - 1
#: how close to 0 or 1 Milvus lets a sample factor come
_SAMPLE_EPSILON = 1e-10


# ---------------------------------------------------------------------------------- helpers


def _is_scalar(value: object) -> TypeGuard[Scalar]:
    """Exact types: the evaluator classifies values by type, and a numpy scalar in params
    would otherwise slip through as a float subclass."""
    return type(value) in (bool, int, float, str)


def _is_number(value: object) -> TypeGuard[int | float]:
    """bool is an int subclass in Python but never a number in an expression."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_bool_literal(node: Expr) -> bool:
    return isinstance(node, Literal) and isinstance(node.value, bool)


def _is_constant(node: Expr) -> bool:
    """Constant-only arithmetic is allowed (``age > 2 * 3``) but a comparison of two
    constants filters nothing, so it is almost certainly a mistake."""
    if isinstance(node, Literal):
        return True
    return isinstance(node, (Neg, Arith)) and all(_is_constant(c) for c in node.children())


def _direction(op: str) -> str | None:
    return {"<": "up", "<=": "up", ">": "down", ">=": "down"}.get(op)


# ------------------------------------------------------------------------------- public API


def parse(
    text: str,
    params: Mapping[str, object] | None = None,
    zone: str = timestamptz.DEFAULT_TIMEZONE,
) -> Expr:
    """Parse a Milvus filter expression; ``{name}`` placeholders take their value from
    ``params``; ``ISO '...'`` literals without an offset are in ``zone``. An empty
    expression means "no filter" and parses to a constant true."""
    return _Parser(text, params, zone).parse()


def referenced_fields(tree: Expr) -> set[str]:
    """Names exactly as written (``$meta`` for ``$meta["k"]``, ``color`` for a bare dynamic
    key): without a schema a bare name cannot be told apart from a dynamic key, so callers map
    names their schema lacks to the dynamic field."""
    return {name for name, _ in referenced_paths(tree)}


def referenced_paths(tree: Expr) -> set[tuple[str, tuple[PathKey, ...]]]:
    """Every field reference as (name, JSON path) written in the expression."""
    if isinstance(tree, Field):
        return {(tree.name, tree.path)}
    return set().union(*(referenced_paths(child) for child in tree.children()))


def path_text(name: str, path: tuple[PathKey, ...]) -> str:
    """A field's JSON path as one canonical filter text (``meta["a"][0]``): how a JSON path
    index is named, whichever quotes and spacing its ``json_path`` was written with."""
    return name + "".join(f"[{json.dumps(key, ensure_ascii=False)}]" for key in path)


def split_sample(tree: Expr) -> tuple[Expr | None, float | None]:
    """A filter as (the rest of it, its ``random_sample`` factor): the factor is None when
    there is no sample, the rest None when the sample is the whole filter. As Milvus, the
    sample counts only as the last condition of the top-level ``and`` (nested ``and``s on
    its right flatten into it)."""
    if isinstance(tree, RandomSample):
        return None, tree.factor
    if not isinstance(tree, And):
        return tree, None
    *before, last = tree.operands
    rest, factor = split_sample(last)
    if factor is None:
        return tree, None
    operands = (*before, rest) if rest is not None else tuple(before)
    return (operands[0] if len(operands) == 1 else And(operands, text=tree.text)), factor


def _holds(tree: Expr, node_type: type[Expr]) -> bool:
    return isinstance(tree, node_type) or any(_holds(child, node_type) for child in tree.children())


def pk_terms(tree: Expr, pk_name: str) -> list[int | str] | None:
    """The primary keys an expression selects when it is nothing but pk equalities, which lets
    callers (delete, query by id) look keys up instead of scanning every row."""
    values = _pk_values(tree, pk_name)
    return None if values is None else list(dict.fromkeys(values))


def _pk_values(node: Expr, pk_name: str) -> list[int | str] | None:
    if isinstance(node, Or):
        collected: list[int | str] = []
        for operand in node.operands:
            part = _pk_values(operand, pk_name)
            if part is None:
                return None
            collected.extend(part)
        return collected
    candidates = _pk_candidates(node, Field(pk_name))
    if candidates is None:
        return None
    keys = [value for value in candidates if _is_integer(value) or isinstance(value, str)]
    return keys if len(keys) == len(candidates) else None


def _pk_candidates(node: Expr, pk: Field) -> list[object] | None:
    if isinstance(node, InList) and not node.negated and node.operand == pk:
        return list(node.values)
    if not (isinstance(node, Compare) and node.op == "=="):
        return None
    for field_side, constant_side in ((node.left, node.right), (node.right, node.left)):
        if field_side == pk and type(constant_side) is Literal:  # an Instant is no key
            return [constant_side.value]
    return None
