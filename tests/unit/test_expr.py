from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from vectide.services.common.expr import ExprError, evaluate, parse, pk_terms, referenced_fields
from vectide.services.common.expr.parser import (
    And,
    Arith,
    ArrayLength,
    Compare,
    Exists,
    Field,
    InList,
    IsNull,
    JsonContains,
    Like,
    Literal,
    Neg,
    Not,
    Or,
)
from vectide.services.common.msgstream.message import DataType


@dataclass
class FakeSource:
    """A ColumnSource over plain dicts; ``num_rows`` is taken from the first column."""

    columns: dict[str, np.ndarray | list]
    types: dict[str, DataType]
    dynamic_field: str | None = None
    fetched: list[str] = field(default_factory=list)
    #: nullable columns' validity masks
    validity: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.columns.values())))

    def field_type(self, name: str) -> DataType | None:
        return self.types.get(name)

    def column(self, name: str) -> np.ndarray | list:
        self.fetched.append(name)
        return self.columns[name]

    def valid(self, name: str) -> np.ndarray | None:
        return self.validity.get(name)


def make_source(dynamic: bool = True) -> FakeSource:
    columns: dict[str, np.ndarray | list] = {
        "id": np.array([0, 1, 2, 3, 4, 5], dtype=np.int64),
        "age": np.array([-7, 10, 20, 30, 40, 120], dtype=np.int8),
        "score": np.array([0.5, 1.5, 2.5, 3.5, 4.5, 0.1], dtype=np.float32),
        "weight": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float64),
        "flag": np.array([True, False, True, False, True, False]),
        "name": ["alice", "bob", "carol", "dave", "50%_off", "a.b"],
        "meta": [
            {"n": 1, "s": "x", "tags": ["red", 1], "sub": {"k": 5}},
            {"n": 2.5, "s": "y", "tags": ["blue"], "sub": {"k": "5"}},
            {"n": True, "s": 3, "tags": [], "sub": None},
            {"n": "1", "tags": "red", "sub": {"k": [1, 2]}},
            {"n": None, "s": "ab%"},
            None,
        ],
        "vec": np.zeros((6, 2), dtype=np.float32),
    }
    types = {
        "id": DataType.INT64,
        "age": DataType.INT8,
        "score": DataType.FLOAT,
        "weight": DataType.DOUBLE,
        "flag": DataType.BOOL,
        "name": DataType.VARCHAR,
        "meta": DataType.JSON,
        "vec": DataType.FLOAT_VECTOR,
    }
    if dynamic:
        columns["$meta"] = [
            {"color": "red", "size": 1},
            {"color": "blue", "size": 2},
            {"color": "red", "size": 3, "on": True},
            {"color": None},
            {"size": "4", "on": False},
            {},
        ]
        types["$meta"] = DataType.JSON
    return FakeSource(columns, types, "$meta" if dynamic else None)


def rows(expr: str, source: FakeSource | None = None, **params: object) -> list[int]:
    """Indices of the rows matching ``expr``, the most readable form for assertions."""
    mask = evaluate(parse(expr, params or None), source or make_source())
    assert mask.dtype == bool
    return np.flatnonzero(mask).tolist()


# ------------------------------------------------------------------------------- parsing


def test_parse_builds_a_tree_of_frozen_nodes() -> None:
    tree = parse('age > 20 and color in ["red", "blue"]')
    assert tree == And(
        (
            Compare(">", Field("age"), Literal(20)),
            InList(Field("color"), ("red", "blue")),
        )
    )
    assert tree.text == 'age > 20 and color in ["red", "blue"]'
    with pytest.raises(AttributeError):
        tree.operands = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("-42", -42),
        ("- 3", -3),
        ("1.5", 1.5),
        ("-1.5", -1.5),
        ("1e3", 1000.0),
        ("2.5E-1", 0.25),
        (".5", 0.5),
        ('"double"', "double"),
        ("'single'", "single"),
        (r'"say \"hi\""', 'say "hi"'),
        (r"'it\'s'", "it's"),
        (r'"tab\there\nnew"', "tab\there\nnew"),
        (r'"back\\slash"', "back\\slash"),
        (r'"caf\u00e9"', "café"),
        (r'"a\%b\_c"', r"a\%b\_c"),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
    ],
)
def test_literals(text: str, value: bool | int | float | str) -> None:
    tree = parse(f"x == {text}")
    assert tree == Compare("==", Field("x"), Literal(value))
    assert isinstance(tree, Compare)
    assert isinstance(tree.right, Literal)
    assert type(tree.right.value) is type(value)


def test_list_literals_allow_negatives_mixed_types_and_a_trailing_comma() -> None:
    assert parse('x in [1, -2, 3.5, "a", true,]') == InList(Field("x"), (1, -2, 3.5, "a", True))
    assert parse("x in []") == InList(Field("x"), ())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a or b and c", Or((Field("a"), And((Field("b"), Field("c")))))),
        ("a and b or c", Or((And((Field("a"), Field("b"))), Field("c")))),
        ("not a and b", And((Not(Field("a")), Field("b")))),
        ("not a or not b", Or((Not(Field("a")), Not(Field("b"))))),
        ("(a or b) and c", And((Or((Field("a"), Field("b"))), Field("c")))),
        ("not (a or b)", Not(Or((Field("a"), Field("b"))))),
        ("a and b and c", And((Field("a"), Field("b"), Field("c")))),
        ("not not a", Not(Not(Field("a")))),
        ("!a && b || c", Or((And((Not(Field("a")), Field("b"))), Field("c")))),
        ("not x > 1", Not(Compare(">", Field("x"), Literal(1)))),
        (
            "x + 2 * y > 1",
            Compare(">", Arith("+", Field("x"), Arith("*", Literal(2), Field("y"))), Literal(1)),
        ),
        (
            "(x + 2) * y > 1",
            Compare(">", Arith("*", Arith("+", Field("x"), Literal(2)), Field("y")), Literal(1)),
        ),
        (
            "x - 1 - 2 < 0",
            Compare("<", Arith("-", Arith("-", Field("x"), Literal(1)), Literal(2)), Literal(0)),
        ),
        ("-x < 3", Compare("<", Neg(Field("x")), Literal(3))),
    ],
)
def test_precedence(text: str, expected: object) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        'a > 1 AND b IN [1] Or NOT c LIKE "x%"',
        'a > 1 and b in [1] or not c like "x%"',
        'a > 1 && b in [1] || !c like "x%"',
    ],
)
def test_keywords_are_case_insensitive_and_have_symbol_forms(text: str) -> None:
    assert parse(text) == Or(
        (
            And((Compare(">", Field("a"), Literal(1)), InList(Field("b"), (1,)))),
            Not(Like(Field("c"), "x%")),
        )
    )


@pytest.mark.parametrize(
    ("text", "low_op", "high_op"),
    [
        ("1 < age < 5", "<", "<"),
        ("1 <= age <= 5", "<=", "<="),
        ("1 < age <= 5", "<", "<="),
    ],
)
def test_chained_ranges_become_two_comparisons(text: str, low_op: str, high_op: str) -> None:
    assert parse(text) == And(
        (Compare(low_op, Literal(1), Field("age")), Compare(high_op, Field("age"), Literal(5)))
    )


def test_descending_chained_range() -> None:
    assert parse("5 >= age > 1") == And(
        (Compare(">=", Literal(5), Field("age")), Compare(">", Field("age"), Literal(1)))
    )


def test_json_paths_functions_and_null_checks() -> None:
    path = Field("meta", ("a", "b", 0))
    assert parse('meta["a"]["b"][0] == 1') == Compare("==", path, Literal(1))
    assert parse('exists $meta["c"]') == Exists(Field("$meta", ("c",)))
    assert parse("exists color") == Exists(Field("color"))
    assert parse('json_contains(m["t"], "x")') == JsonContains(Field("m", ("t",)), ("x",), True)
    assert parse("JSON_CONTAINS_ALL(m, [1, 2])") == JsonContains(Field("m"), (1, 2), True)
    assert parse("json_contains_any(m, [1])") == JsonContains(Field("m"), (1,), False)
    length = ArrayLength(Field("m"))
    assert parse("array_length(m) > 2") == Compare(">", length, Literal(2))
    assert parse("m is null") == IsNull(Field("m"))
    assert parse("m IS NOT NULL") == IsNull(Field("m"), negated=True)
    assert parse('n not like "a%"') == Like(Field("n"), "a%", negated=True)
    assert parse("n not in [1]") == InList(Field("n"), (1,), negated=True)


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_expression_means_no_filter(text: str) -> None:
    tree = parse(text)
    assert tree == Literal(True)
    assert evaluate(tree, make_source()).all()


def test_template_params_are_substituted_as_literals() -> None:
    params = {"low": 20, "names": ["bob", "dave"], "pattern": "a%", "on": True}
    tree = parse("age > {low} and name in {names} or name like { pattern } or flag == {on}", params)
    assert tree == Or(
        (
            And((Compare(">", Field("age"), Literal(20)), InList(Field("name"), ("bob", "dave")))),
            Like(Field("name"), "a%"),
            Compare("==", Field("flag"), Literal(True)),
        )
    )
    assert rows("age > {low} and id < {high}", low=15, high=5) == [2, 3, 4]


@pytest.mark.parametrize(
    ("text", "params", "message"),
    [
        ("age > {missing}", {"low": 1}, "unknown placeholder {missing} at position 6"),
        ("age > {low}", None, "unknown placeholder {low}"),
        ("age > {low}", {"low": {"a": 1}}, "placeholder {low} must be a scalar or a list"),
        ("age > {low}", {"low": [1, 2]}, "a list is only allowed after 'in'"),
    ],
)
def test_template_errors(text: str, params: dict[str, object] | None, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        parse(text, params)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("age >", "unexpected end of expression at position 5"),
        ("age > 1 2", "unexpected '2' at position 8"),
        ("(age > 1", "expected '\\)' but found end of expression at position 8"),
        ('name == "abc', "unterminated string at position 8"),
        ("age # 1", "unexpected '#' at position 4"),
        ("age > 1 and", "unexpected end of expression at position 11"),
        ("foo(age) > 1", "unknown function 'foo' at position 0"),
        ("5", "expected a boolean expression, got '5' at position 0"),
        ("age + 1", "expected a boolean expression, got 'age \\+ 1' at position 0"),
        ("age > 1 and 5", "expected a boolean expression, got '5' at position 12"),
        ("(age > 1) + 2 > 3", "expected a value, got the condition 'age > 1' at position 0"),
        ("age == [1, 2]", "a list is only allowed after 'in'"),
        ("age in 3", "'in' needs a list at position 7"),
        ("age in [1, age]", "list elements must be constants at position 11"),
        ("name like 3", "'like' needs a string pattern at position 10"),
        ("1 < 2", "a comparison needs a field on at least one side at position 0"),
        ("1 in [1]", "expected a field, got the constant '1'"),
        ("1 < age > 0", "a range needs two '<'/'<=' or two '>'/'>='"),
        ("1 == age == 1", "a range needs two"),
        ('age + "a" > 1', "arithmetic needs numbers"),
        ("age[-1] > 1", "a JSON path key must be a string or a non-negative integer"),
        ("(age + 1)[0] > 1", "only fields can be indexed"),
        ("(age + 1) is null", "'is null' needs a field"),
        ("exists 1", "expected a field, got '1'"),
        ('json_contains(m, ["a"])', "json_contains needs a constant"),
        ("json_contains_all(m, 1)", "json_contains_all needs a list"),
        ("array_length(1) > 2", "expected a field"),
        ("array_length(m, 1) > 2", "expected '\\)' but found ','"),
    ],
)
def test_syntax_errors_name_the_problem_position_and_expression(text: str, message: str) -> None:
    with pytest.raises(ExprError, match=message) as caught:
        parse(text)
    assert repr(text) in str(caught.value)


def test_expr_error_is_a_value_error() -> None:
    assert issubclass(ExprError, ValueError)


# ----------------------------------------------------------------------------- evaluation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("age > 20", [3, 4, 5]),
        ("age >= 20", [2, 3, 4, 5]),
        ("age < 10", [0]),
        ("age <= 10", [0, 1]),
        ("age == 30", [3]),
        ("age != 30", [0, 1, 2, 4, 5]),
        ("20 < age", [3, 4, 5]),
        ("30 == age", [3]),
        ("age > -10", [0, 1, 2, 3, 4, 5]),
        ("age > 1000", []),
        ("age < 1000", [0, 1, 2, 3, 4, 5]),
        ("age > 15.5", [2, 3, 4, 5]),
        ("score == 0.1", [5]),
        ("score >= 2.5", [2, 3, 4]),
        ("weight < 3", [0, 1]),
        ("id < age", [1, 2, 3, 4, 5]),
        ("weight == id + 1", [0, 1, 2, 3, 4, 5]),
        ("name == name", [0, 1, 2, 3, 4, 5]),
    ],
)
def test_numeric_comparisons(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 < id < 4", [2, 3]),
        ("1 <= id <= 4", [1, 2, 3, 4]),
        ("10 <= age < 40", [1, 2, 3]),
        ("4 > id > 1", [2, 3]),
        ("4 >= id >= 1", [1, 2, 3, 4]),
        ("1.5 < score <= 3.5", [2, 3]),
    ],
)
def test_ranges(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("age + 1 > 30", [3, 4, 5]),
        ("age - 10 == 0", [1]),
        ("weight * 2 <= 6", [0, 1, 2]),
        ("id % 2 == 0", [0, 2, 4]),
        ("age % 3 == -1", [0]),
        ("age / 3 == -2", [0]),
        ("age / 3 == 3", [1]),
        ("age / 4.0 == 2.5", [1]),
        ("weight / 2 == 1.5", [2]),
        ("-age > 0", [0]),
        ("-(id + 1) == -3", [2]),
        ("age * 100 > 10000", [5]),
        ("age > 2 * 10", [3, 4, 5]),
        ("age > -(5 - 25)", [3, 4, 5]),
        ("10 - id > 7", [0, 1, 2]),
        ("id * weight > 10", [3, 4, 5]),
    ],
)
def test_arithmetic(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id in [1, 3, 99]", [1, 3]),
        ("id not in [1, 3]", [0, 2, 4, 5]),
        ("age in [10.0, 20]", [1, 2]),
        ("age in [10.5, 1000]", []),
        ("score in [0.1, 2.5]", [2, 5]),
        ("id in []", []),
        ("id not in []", [0, 1, 2, 3, 4, 5]),
        ("flag in [false]", [1, 3, 5]),
        ('name in ["bob", "dave", "zed"]', [1, 3]),
        ('name not in ["bob"]', [0, 2, 3, 4, 5]),
        ("id + 1 in [2, 3]", [1, 2]),
    ],
)
def test_in_lists(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name == "bob"', [1]),
        ('name != "bob"', [0, 2, 3, 4, 5]),
        ('name < "c"', [0, 1, 4, 5]),
        ('"c" <= name', [2, 3]),
        ('name like "a%"', [0, 5]),
        ('name like "%e"', [0, 3]),
        ('name like "%o%"', [1, 2, 4]),
        ('name like "_o_"', [1]),
        ('name like "a_b"', [5]),
        ('name like "a.%"', [5]),
        ('name like "%\\%\\_%"', [4]),
        ('name like "50\\%%"', [4]),
        ('name like "alice"', [0]),
        ('name like "%"', [0, 1, 2, 3, 4, 5]),
        ('name not like "%a%"', [1, 4]),
    ],
)
def test_varchar(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("flag", [0, 2, 4]),
        ("not flag", [1, 3, 5]),
        ("!flag", [1, 3, 5]),
        ("flag == true", [0, 2, 4]),
        ("flag != true", [1, 3, 5]),
        ("flag == False", [1, 3, 5]),
        ("flag == flag", [0, 1, 2, 3, 4, 5]),
        ("flag and id > 1", [2, 4]),
        ("true", [0, 1, 2, 3, 4, 5]),
        ("false", []),
    ],
)
def test_bool_fields_and_constants(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id < 2 or id > 4 and flag", [0, 1]),
        ("(id < 2 or id > 3) and flag", [0, 4]),
        ("not id < 2 and not flag", [3, 5]),
        ("not (id < 2 and flag)", [1, 2, 3, 4, 5]),
        ("id == 1 || id == 2 && flag", [1, 2]),
    ],
)
def test_boolean_operators_follow_precedence(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


def test_bool_field_mask_is_a_copy() -> None:
    source = make_source()
    mask = evaluate(parse("flag"), source)
    mask[:] = False
    assert source.columns["flag"][0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('meta["n"] == 1', [0]),
        ('meta["n"] == 1.0', [0]),
        ('meta["n"] > 1', [1]),
        ('meta["n"] != 1', [1]),
        ('meta["n"] == true', [2]),
        ('meta["n"] != true', []),
        ('meta["n"] == "1"', [3]),
        ('meta["s"] == "x"', [0]),
        ('meta["s"] >= "y"', [1]),
        ('meta["s"] == 3', [2]),
        ('meta["sub"]["k"] == 5', [0]),
        ('meta["sub"]["k"] == "5"', [1]),
        ('meta["sub"]["k"][1] == 2', [3]),
        ('meta["sub"]["k"][2] == 2', []),
        ('meta["tags"][0] == "red"', [0]),
        ('meta["tags"][5] == "red"', []),
        ('meta["missing"] == 1', []),
        ('meta["missing"]["deeper"] == 1', []),
        ('not meta["missing"] == 1', [0, 1, 2, 3, 4, 5]),
        ('meta["n"] in [1, "1", true]', [0, 2, 3]),
        ('meta["n"] in [2.5]', [1]),
        ('meta["n"] not in [1]', [1, 2, 3]),
        ('meta["s"] like "a%"', [4]),
        ('meta["s"] not like "a%"', [0, 1]),
        ('meta["n"] + 1 == 2', [0]),
        ('meta["n"] * 2 > 4', [1]),
        ('meta["n"] / 0 == 1', []),
        ('meta["n"] > id', [0, 1]),
        ('id == meta["sub"]["k"]', []),
        ('meta["s"] == name', []),
        ('meta["n"] == meta["n"]', [0, 1, 2, 3]),
        ('meta["n"] > meta["n"] - 1', [0, 1]),
        ('-meta["n"] == -1', [0]),
        ('meta["n"]', [2]),
    ],
)
def test_json_paths(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('exists meta["s"]', [0, 1, 2, 4]),
        ('exists meta["n"]', [0, 1, 2, 3, 4]),
        ('exists meta["sub"]["k"]', [0, 1, 3]),
        ('meta["n"] is null', [4, 5]),
        ('meta["sub"] is null', [2, 4, 5]),
        ('meta["n"] is not null', [0, 1, 2, 3]),
        ("meta is null", [5]),
        ("id is null", []),
        ("name is not null", [0, 1, 2, 3, 4, 5]),
        ('json_contains(meta["tags"], "red")', [0]),
        ('json_contains(meta["tags"], 1)', [0]),
        ('json_contains(meta["tags"], true)', []),
        ('json_contains_all(meta["tags"], ["red", 1])', [0]),
        ('json_contains_all(meta["tags"], ["red", "blue"])', []),
        ('json_contains_all(meta["tags"], [])', [0, 1, 2]),
        ('json_contains_any(meta["tags"], ["blue", 1])', [0, 1]),
        ('json_contains_any(meta["tags"], [])', []),
        ('array_length(meta["tags"]) == 0', [2]),
        ('array_length(meta["tags"]) >= 1', [0, 1]),
        ('array_length(meta["sub"]["k"]) == 2', [3]),
    ],
)
def test_json_exists_null_and_functions(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('color == "red"', [0, 2]),
        ('$meta["color"] == "red"', [0, 2]),
        ('color in ["blue", "green"]', [1]),
        ("size > 1", [1, 2]),
        ('size == "4"', [4]),
        ("on", [2]),
        ("not on", [0, 1, 3, 4, 5]),
        ("on == false", [4]),
        ("exists color", [0, 1, 2, 3]),
        ('exists $meta["on"]', [2, 4]),
        ("color is null", [3, 4, 5]),
        ("ghost == 1", []),
        ('age > 20 and color == "red"', []),
        ('id < 3 and color == "red"', [0, 2]),
    ],
)
def test_dynamic_field_resolution(text: str, expected: list[int]) -> None:
    assert rows(text) == expected


def test_unknown_field_without_dynamic_field_is_an_error() -> None:
    with pytest.raises(ExprError, match="field color not exist in expression 'color == 1'"):
        rows("color == 1", make_source(dynamic=False))


def test_a_field_used_twice_is_fetched_once() -> None:
    source = make_source()
    assert rows("1 < age + 0 < 40 and age != 20", source) == [1, 3]
    assert source.fetched == ["age"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name > 3", "cannot compare 'name' \\(string\\) with '3' \\(number\\)"),
        ('age == "x"', "cannot compare 'age' \\(number\\) with '\"x\"' \\(string\\)"),
        ("flag == 1", "cannot compare 'flag' \\(bool\\) with '1' \\(number\\)"),
        ("age == true", "cannot compare 'age' \\(number\\) with 'true' \\(bool\\)"),
        ("name == id", "cannot compare 'name' \\(string\\) with 'id' \\(number\\)"),
        ("flag > true", "booleans cannot be ordered"),
        ("flag < flag", "booleans cannot be ordered"),
        ('meta["n"] > true', "booleans cannot be ordered"),
        ("vec > 1", "FLOAT_VECTOR field vec cannot be used in a filter"),
        ('age in ["a"]', "list values must all be of type number"),
        ("name in [1]", "list values must all be of type string"),
        ('age like "1%"', "'like' needs a VARCHAR or JSON string"),
        ("age / 0 > 1", "division by zero: 'age / 0'"),
        ("age % (1 - 1) > 1", "division by zero"),
        ("exists age", "'age' is not a JSON field or path"),
        ('json_contains(name, "a")', "'name' is not a JSON field or path"),
        ("array_length(id) > 1", "'id' is not a JSON field or path"),
        ('age["a"] > 1', "INT8 field age has no JSON path"),
        ("name + 1 > 2", "arithmetic needs numbers, got a string"),
        ("flag + 1 > 2", "arithmetic needs numbers, got a bool"),
        ("age", "'age' is not a boolean field"),
        ("id * 9223372036854775807000 > 1", "integer out of range"),
    ],
)
def test_evaluation_errors(text: str, message: str) -> None:
    with pytest.raises(ExprError, match=message) as caught:
        rows(text)
    assert f"in expression {text!r}" in str(caught.value)


def test_million_rows() -> None:
    count = 1_000_000
    ids = np.arange(count, dtype=np.int64)
    ages = (ids * 7919 % 1000).astype(np.int32)
    source = FakeSource({"id": ids, "age": ages}, {"id": DataType.INT64, "age": DataType.INT32})
    mask = evaluate(parse("age > 500 and id % 3 == 0"), source)
    assert mask.shape == (count,)
    np.testing.assert_array_equal(mask, (ages > 500) & (ids % 3 == 0))


# ------------------------------------------------------------------------- tree analysis


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pk in [1, 2, 3]", [1, 2, 3]),
        ("pk == 5", [5]),
        ("5 == pk", [5]),
        ("pk == 1 or pk == 2", [1, 2]),
        ("pk == 1 or pk in [2, 1] or 3 == pk", [1, 2, 3]),
        ("(pk == 1) or (pk == 2)", [1, 2]),
        ("pk == -4", [-4]),
        ("pk in []", []),
        ('pk in ["a", "b"]', ["a", "b"]),
        ('pk == "a" or pk == "c"', ["a", "c"]),
        ("PK in [1]", None),
        ("pk > 3", None),
        ("pk != 3", None),
        ("pk not in [1, 2]", None),
        ("pk in [1] and age > 2", None),
        ("pk == 1 or age == 2", None),
        ("pk == other", None),
        ("not pk == 1", None),
        ("pk + 1 == 2", None),
        ('pk["a"] == 1', None),
        ("pk == 1.5", None),
        ("pk == true", None),
        ("pk in [1, 2.5]", None),
        ("", None),
    ],
)
def test_pk_terms(text: str, expected: list[int | str] | None) -> None:
    assert pk_terms(parse(text), "pk") == expected


def test_pk_terms_with_template_params() -> None:
    assert pk_terms(parse("id in {ids}", {"ids": [7, 8]}), "id") == [7, 8]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", set()),
        ("age > 1", {"age"}),
        ("1 < age < 5 and name like 'a%'", {"age", "name"}),
        ('$meta["color"] == "red" or size > 2', {"$meta", "size"}),
        ('json_contains(meta["t"], 1) and array_length(m2) > 1', {"meta", "m2"}),
        ("exists x or y is null or not z", {"x", "y", "z"}),
        ("a + b * -c > d % 2", {"a", "b", "c", "d"}),
        ("id in [1, 2]", {"id"}),
    ],
)
def test_referenced_fields(text: str, expected: set[str]) -> None:
    assert referenced_fields(parse(text)) == expected
