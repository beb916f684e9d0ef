"""Scalar indexes answer filters exactly as the scan does, without reading the columns.

Random rows (nulls, NaN, duplicates, shared prefixes, arrays) in a growing store cut into
chunks, with some chunks indexed and a tail that is not; random filters over every operator
the indexes answer, mixed with ones they do not; the rows the planner selects must be the
scan's, and a filter it cannot answer must fall back (or fail) as the scan does.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from pymilvus import DataType as ClientType
from pymilvus import MilvusClient
from pymilvus.client.prepare import Prepare

from benchmarks.search_path import Context
from vectide.services.common.errors import MilvusError
from vectide.services.common.expr import ExprError, evaluate, indexed, parse
from vectide.services.common.expr.evaluate import truth_mask
from vectide.services.common.expr.indexed import select
from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
from vectide.services.common.requests import ShardQueryRequest
from vectide.services.common.schema import CollectionSchema, FieldSchema, IndexInfo
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.proxy.index_kinds import scalar_index_type
from vectide.services.querynode.reads import StoreColumns, ensure_indexes, query_store
from vectide.services.querynode.segment import ShardStore
from vectide.services.testing import Harness

CHUNK = 64
ROWS = 300  # four indexed chunks, a 44-row tail
INDEXED = {
    "id": "STL_SORT",
    "i8": "INVERTED",
    "f32": "STL_SORT",
    "f64": "INVERTED",
    "s": "TRIE",
    "t": "INVERTED",
    "b": "BITMAP",
    "c": "BITMAP",
    "arr": "INVERTED",
    "tags": "BITMAP",
    "g": "NGRAM",
}
WORDS = ["", "a", "ab", "abc", "abd", "b", "ba", "b%", "b_x", "zz", "a\\b", "é", "ab\n"]
#: JSON path indexes: (field, json_path as written, cast type) and the key filters find them by
JSON_INDEXED = [
    ("doc", "doc['x']", "VARCHAR", 'doc["x"]'),
    ("doc", 'doc["x"]', "DOUBLE", None),  # the same path twice: refused by CreateIndex
    ("doc", 'doc["n"]', "DOUBLE", 'doc["n"]'),
    ("doc", 'doc["o"]["f"]', "BOOL", 'doc["o"]["f"]'),
    ("doc", 'doc["tags"]', "ARRAY_VARCHAR", 'doc["tags"]'),
    ("$meta", '$meta["color"]', "VARCHAR", '$meta["color"]'),
]
#: what a JSON value can be: every kind, NaN, integers past a double's precision
JSON_VALUES = [*WORDS[:6], 0, 1, 1.0, -2, 2.5, 2**60 + 1, float("nan"), True, False, None, [1]]
#: what a filter compares them with
JSON_LITERALS = [v for v in JSON_VALUES if v is not None and v == v and not isinstance(v, list)]


def schema() -> CollectionSchema:
    def f(i: int, name: str, data_type: DataType, **kw) -> FieldSchema:
        return FieldSchema(i, name, data_type, **kw)

    return CollectionSchema(
        "c",
        [
            f(100, "id", DataType.INT64, is_primary=True),
            f(101, "v", DataType.FLOAT_VECTOR, dim=2),
            f(102, "i8", DataType.INT8, nullable=True),
            f(103, "f32", DataType.FLOAT),
            f(104, "f64", DataType.DOUBLE, nullable=True),
            f(105, "s", DataType.VARCHAR, max_length=8),
            f(106, "t", DataType.VARCHAR, max_length=8, nullable=True),
            f(107, "b", DataType.BOOL),
            f(108, "c", DataType.INT32),
            f(109, "arr", DataType.ARRAY, element_type=DataType.INT64, nullable=True),
            f(110, "tags", DataType.ARRAY, element_type=DataType.VARCHAR),
            f(111, "u", DataType.INT64),  # not indexed
            f(112, "j", DataType.JSON),
            f(113, "doc", DataType.JSON, nullable=True),
            f(114, "$meta", DataType.JSON, is_dynamic=True),
            f(115, "g", DataType.VARCHAR, max_length=64, nullable=True),
        ],
    )


def indexes() -> list[IndexInfo]:
    infos = [IndexInfo(1, "v", "v", "FLAT", "L2")]
    for i, (name, index_type) in enumerate(INDEXED.items()):
        params = {"min_gram": "2", "max_gram": "3"} if index_type == "NGRAM" else {}
        infos.append(IndexInfo(i + 2, name, name, index_type, "", params))
    for i, (field, _, cast, key) in enumerate(JSON_INDEXED):
        if key is not None:
            params = {"json_path": key, "json_cast_type": cast}
            infos.append(IndexInfo(100 + i, key, field, "INVERTED", "", params))
    ngram = {"json_path": 'doc["w"]', "json_cast_type": "VARCHAR", "min_gram": "2", "max_gram": "3"}
    return [*infos, IndexInfo(99, "doc_w", "doc", "NGRAM", "", ngram)]


def json_keys() -> list[str]:
    return [*(key for *_, key in JSON_INDEXED if key is not None), 'doc["w"]']


def json_doc(rng: random.Random) -> dict:
    """Each key present or not, with a value of any kind."""
    doc: dict = {}
    for key in ("x", "n"):
        if rng.random() < 0.85:
            doc[key] = rng.choice(JSON_VALUES)
    if rng.random() < 0.85:  # NGRAM: texts, now and then another kind
        words = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        doc["w"] = words if rng.random() < 0.9 else rng.choice(JSON_VALUES)
    if rng.random() < 0.8:
        doc["o"] = {"f": rng.choice([True, False, 1, "true"])} if rng.random() < 0.9 else []
    if rng.random() < 0.8:
        doc["tags"] = rng.sample([*WORDS[:6], 1, True], rng.randint(0, 3))
    return doc


def rows_msg(rng: random.Random, start: int, n: int) -> InsertMsg:
    def nulls() -> np.ndarray:
        return np.array([rng.random() > 0.2 for _ in range(n)])

    floats = [rng.choice([0.1, 0.5, 1.0, -2.0, float("nan"), rng.random()]) for _ in range(n)]
    columns = [
        FieldColumn(101, "v", DataType.FLOAT_VECTOR, np.zeros((n, 2), np.float32), 2),
        FieldColumn(102, "i8", DataType.INT8, [rng.randint(-3, 3) for _ in range(n)], 0, nulls()),
        FieldColumn(103, "f32", DataType.FLOAT, np.array(floats, np.float32)),
        FieldColumn(104, "f64", DataType.DOUBLE, np.array(floats[::-1]), 0, nulls()),
        FieldColumn(105, "s", DataType.VARCHAR, [rng.choice(WORDS) for _ in range(n)]),
        FieldColumn(106, "t", DataType.VARCHAR, [rng.choice(WORDS) for _ in range(n)], 0, nulls()),
        FieldColumn(107, "b", DataType.BOOL, np.array([rng.random() < 0.3 for _ in range(n)])),
        FieldColumn(108, "c", DataType.INT32, np.array([rng.randint(0, 4) for _ in range(n)])),
        FieldColumn(
            109,
            "arr",
            DataType.ARRAY,
            [json.dumps([rng.randint(0, 5) for _ in range(rng.randint(0, 3))]) for _ in range(n)],
            0,
            nulls(),
        ),
        FieldColumn(
            110,
            "tags",
            DataType.ARRAY,
            [json.dumps(rng.sample(WORDS[:6], rng.randint(0, 3))) for _ in range(n)],
        ),
        FieldColumn(111, "u", DataType.INT64, np.array([rng.randint(0, 9) for _ in range(n)])),
        FieldColumn(112, "j", DataType.JSON, [json.dumps({"k": rng.randint(0, 3)})] * n),
        FieldColumn(
            113, "doc", DataType.JSON, [json.dumps(json_doc(rng)) for _ in range(n)], 0, nulls()
        ),
        FieldColumn(
            115,
            "g",
            DataType.VARCHAR,
            ["".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4))) for _ in range(n)],
            0,
            nulls(),
        ),
        FieldColumn(
            114,
            "$meta",
            DataType.JSON,
            [
                json.dumps({"color": rng.choice([*WORDS[:4], 3])} if rng.random() < 0.9 else {})
                for _ in range(n)
            ],
        ),
    ]
    pks = np.array([rng.randint(0, ROWS // 2) for _ in range(n)], np.int64)  # duplicates
    del start
    stamps = np.full(n, 5, np.int64)
    return InsertMsg(1, 5, 1, 1, 1, 1, "ch", pks, np.zeros(n, np.int64), stamps, columns)


def store(seed: int) -> ShardStore:
    rng = random.Random(seed)
    built = ShardStore(schema(), indexes(), chunk_rows=CHUNK)
    for start in range(0, ROWS, 100):
        built.insert(rows_msg(rng, start, 100))
    assert built.build_scalar_indexes() == (len(INDEXED) + len(json_keys())) * (ROWS // CHUNK)
    return built


# -- random filters ----------------------------------------------------------------------

OPS = ["==", "!=", "<", "<=", ">", ">="]


def literal(rng: random.Random, field: str) -> str:
    """Mostly the field's own kind; now and then another (the scan refuses those)."""
    if rng.random() < 0.05:
        return rng.choice(['"a"', "1", "true", "0.5"])
    if field in ("s", "t", "g"):
        return json.dumps(rng.choice(WORDS))
    if field == "b":
        return rng.choice(["true", "false"])
    if field in ("f32", "f64"):
        return rng.choice(["0.1", "0.5", "1", "-2.0", "0.25", "3"])
    return str(rng.randint(-4, ROWS // 2))


def json_leaf(rng: random.Random) -> str:
    """A predicate on an indexed JSON path (or a dynamic key), with a literal of any kind."""
    path = rng.choice(
        ['doc["x"]', 'doc["n"]', 'doc["o"]["f"]', "color", '$meta["color"]', 'doc["w"]']
    )
    value = json.dumps(rng.choice(JSON_LITERALS))
    if rng.random() < 0.15:
        items = rng.sample([*WORDS[:6], 1, True], 2)
        func = rng.choice(["json_contains", "json_contains_any", "json_contains_all"])
        wanted = items[0] if func == "json_contains" else items
        return f'{func}(doc["tags"], {json.dumps(wanted)})'

    kind = rng.random()
    if kind < 0.1:
        return rng.choice([path, f"not {path}"])
    if kind < 0.25:
        word, other = rng.choice(WORDS[:6]), rng.choice(WORDS[:6])
        pattern = rng.choice([f"{word}%", f"%{word}{other}%", f"%{word}_{other}"])
        return f'{path} {rng.choice(["", "not "])}like "{pattern}"'
    if kind < 0.45:
        values = ", ".join(json.dumps(rng.choice(JSON_LITERALS)) for _ in range(2))
        return f"{path} {rng.choice(['in', 'not in'])} [{values}]"
    if kind < 0.55:
        return f"{value} < {path} <= {json.dumps(rng.choice(JSON_LITERALS))}"
    return f"{path} {rng.choice(OPS)} {value}"


def leaf(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return json_leaf(rng)
    field = rng.choice([*INDEXED, "u"])
    kind = rng.random()
    if field in ("arr", "tags"):
        func = rng.choice(["array_contains", "array_contains_all", "array_contains_any"])
        pick = [rng.randint(0, 5) for _ in range(2)] if field == "arr" else rng.sample(WORDS, 2)
        if func == "array_contains":
            return f"{func}({field}, {json.dumps(pick[0])})"
        return f"{func}({field}, {json.dumps(pick[: rng.randint(0, 2)])})"
    if field == "b" and kind < 0.3:
        return rng.choice(["b", "not b"])
    if field in ("s", "t", "g") and kind < (0.8 if field == "g" else 0.3):
        word, other = rng.choice(WORDS), rng.choice(WORDS)
        pattern = rng.choice(
            [f"{word}%", word, f"%{word}", f"{word}_", "%", f"%{word}%", f"%{word}_{other}%"]
        )
        negated = rng.choice(["", "not "])
        return f"{field} {negated}like {json.dumps(pattern)}"
    if kind < 0.5:
        values = ", ".join(literal(rng, field) for _ in range(rng.randint(0, 3)))
        return f"{field} {rng.choice(['in', 'not in'])} [{values}]"
    if kind < 0.6 and field not in ("b", "s", "t", "g"):
        low, high = sorted([literal(rng, field), literal(rng, field)], key=lambda x: x)
        return f"{low} {rng.choice(['<', '<='])} {field} {rng.choice(['<', '<='])} {high}"
    if kind < 0.7:
        return f"{literal(rng, field)} {rng.choice(OPS)} {field}"
    return f"{field} {rng.choice(OPS)} {literal(rng, field)}"


def expression(rng: random.Random, depth: int = 0) -> str:
    if depth >= 2 or rng.random() < 0.4:
        return leaf(rng) if rng.random() > 0.05 else 'j["k"] == 1'
    parts = [expression(rng, depth + 1) for _ in range(rng.randint(2, 3))]
    joined = f" {rng.choice(['and', 'or'])} ".join(f"({p})" for p in parts)
    return f"not ({joined})" if rng.random() < 0.2 else joined


def scanned(tree, source) -> np.ndarray | str:
    try:
        return np.flatnonzero(evaluate(tree, source))
    except ExprError as exc:
        return str(exc)


@pytest.mark.parametrize("seed", range(6))
def test_indexes_select_exactly_the_rows_the_scan_selects(seed):
    built = store(seed)
    source, views = StoreColumns(built), built.scalar_views()
    assert {name: v.covered for name, v in views.items()} == dict.fromkeys(
        [*INDEXED, *json_keys()], 256
    )
    rng = random.Random(1000 + seed)
    answered = on_paths = on_ngrams = 0
    for _ in range(400):
        text = expression(rng)
        tree = parse(text)
        expected = scanned(tree, source)
        try:
            picked = select(tree, source, views, scan_wide=False)
        except ExprError as exc:
            assert isinstance(expected, str), f"{text}: index raised {exc}"
            continue
        if picked is None:
            continue
        answered += 1
        on_paths += "doc[" in text or "color" in text
        on_ngrams += "g like" in text or 'doc["w"] like' in text
        assert not isinstance(expected, str), f"{text}: scan raised {expected}"
        assert picked.tolist() == expected.tolist(), text
    assert answered > 160  # most filters were answered by the indexes
    assert on_paths > 40  # JSON path indexes among them
    assert on_ngrams > 5  # and NGRAM (a VarChar field, a JSON path)


def test_filters_matching_most_rows_of_numeric_fields_are_scanned():
    built = store(2)
    source, views = StoreColumns(built), built.scalar_views()
    assert select(parse("id > 3"), source, views) is None  # most rows: numpy's scan
    assert select(parse("id > 3"), source, views, scan_wide=False) is not None
    assert select(parse('s > "a"'), source, views) is not None  # strings: the index
    assert select(parse("id == 3"), source, views) is not None


@pytest.mark.parametrize(
    "text,residual",
    [
        ("id == 7", False),
        ("id in [1, 2, 3] and u > 4", True),
        ('3 < c <= 5 or s like "ab%"', False),
        ("not (i8 == 1)", False),
        ('t != "a" and not b', True),
        ("array_contains_any(arr, [1, 2]) and f32 > 0.2", True),
        ("f64 not in [0.5, 1.0]", False),
        ('g like "%ab_zz%" or g like "%abc"', False),  # NGRAM: runs of 2+
        ('g not like "%zz%" and u > 4', True),
        ('g like "%a%" and u > 4', None),  # no run of 2: the NGRAM index cannot narrow
    ],
)
def test_indexed_predicates_never_scan_their_columns(monkeypatch, text, residual):
    """With every row indexed, an indexed predicate reads no column; the other parts of an
    ``and`` are checked on its candidates only."""
    built = ShardStore(schema(), indexes(), chunk_rows=CHUNK)
    rng = random.Random(3)
    built.insert(rows_msg(rng, 0, 2 * CHUNK))
    built.build_scalar_indexes()
    source = StoreColumns(built)
    reads: list[str] = []
    scans: list[int] = []

    class Counting:
        num_rows, dynamic_field = source.num_rows, None
        field_type, valid = source.field_type, source.valid

        def column(self, name: str):
            reads.append(name)
            return source.column(name)

    def counted(tree, rows):
        scans.append(rows.num_rows)
        return truth_mask(tree, rows)

    monkeypatch.setattr(indexed, "truth_mask", counted)
    tree = parse(text)
    picked = select(tree, Counting(), built.scalar_views(), scan_wide=False)
    if residual is None:  # the planner leaves it to the scan
        assert picked is None
        return
    assert picked is not None and picked.tolist() == scanned(tree, source).tolist()
    if not residual:
        assert reads == [] and scans == []
    else:
        assert len(scans) == 1 and scans[0] < built.num_rows


# -- kept in step with the store ------------------------------------------------------------


def query_ids(built: ShardStore, expr: str, snapshot: int = 100, partitions=()) -> list[int]:
    req = ShardQueryRequest(1, ["ch"], 0, 1.0, expr=expr, partition_ids=list(partitions))
    return sorted(query_store(built, req, parse(expr), snapshot).pks.tolist())


def scan_ids(built: ShardStore, expr: str, snapshot: int = 100, partitions=()) -> list[int]:
    mask = built.candidates(snapshot, list(partitions) or None).mask
    mask &= evaluate(parse(expr), StoreColumns(built))
    return sorted(built.pks()[mask].tolist())


def test_reads_through_indexes_see_deletes_snapshots_and_partitions():
    built = store(7)
    built.delete_keys(np.arange(0, 150, 3), np.full(50, 50, np.int64))
    for expr in ['s like "ab%"', "id < 40", "c == 2 and u > 3", "array_contains(arr, 3)"]:
        for snapshot in (4, 5, 49, 50, 100):
            assert query_ids(built, expr, snapshot) == scan_ids(built, expr, snapshot)
        assert query_ids(built, expr, partitions=[2]) == []
        assert query_ids(built, expr, partitions=[1]) == scan_ids(built, expr)


def test_freed_head_chunks_take_their_indexes_along():
    """A handoff hides the growing rows a sealed copy serves; whole leading chunks are freed
    with their scalar indexes, and the rest keep answering from theirs."""
    built = store(8)
    built.hide(np.arange(0, 2 * CHUNK + 10))
    assert built.free_hidden_head() == 2 * CHUNK
    assert {v.covered for v in built.scalar_views().values()} == {2 * CHUNK}
    for expr in ['s like "ab%"', "id < 40", "not b and c in [1, 3]", 'doc["x"] == "ab"']:
        assert query_ids(built, expr) == scan_ids(built, expr)
    built.insert(rows_msg(random.Random(9), 0, 100))  # 272 rows: 2 chunks more, unindexed
    assert query_ids(built, "id < 40") == scan_ids(built, "id < 40")
    assert built.build_scalar_indexes() == 2 * (len(INDEXED) + len(json_keys()))
    assert {v.covered for v in built.scalar_views().values()} == {4 * CHUNK}
    assert query_ids(built, "id < 40") == scan_ids(built, "id < 40")


def test_a_sealed_segment_is_one_indexed_chunk_and_an_index_can_come_later():
    sealed = ShardStore(schema(), indexes()[:3], chunk_rows=ROWS)
    sealed.insert(rows_msg(random.Random(4), 0, ROWS))
    sealed.build_scalar_indexes()
    assert {n: v.covered for n, v in sealed.scalar_views().items()} == {"id": ROWS, "i8": ROWS}
    ensure_indexes([sealed], {"s": "TRIE", "id": "STL_SORT"})  # created after the load
    assert sealed.scalar_views()["s"].covered == ROWS
    for expr in ['s like "b%"', 's == "abc" or i8 > 1']:
        assert query_ids(sealed, expr) == scan_ids(sealed, expr)


# -- CreateIndex's rules --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,params,expected",
    [
        ("i8", {"index_type": "STL_SORT"}, "STL_SORT"),
        ("f32", {"index_type": "inverted", "metric_type": "L2"}, "INVERTED"),
        ("s", {}, "AUTOINDEX"),
        ("b", {"index_type": "BITMAP"}, "BITMAP"),
        ("arr", {"index_type": "BITMAP"}, "BITMAP"),
        ("tags", {"index_type": "INVERTED"}, "INVERTED"),
        ("id", {"index_type": "INVERTED"}, "INVERTED"),
        ("f32", {"index_type": "BITMAP"}, "BITMAP index is not supported on FLOAT field f32"),
        ("b", {"index_type": "STL_SORT"}, "STL_SORT index is not supported on BOOL field b"),
        ("s", {"index_type": "TRIE", "x": 1}, "TRIE"),
        ("g", {"index_type": "ngram", "min_gram": 2, "max_gram": "3"}, "NGRAM"),
        ("g", {"index_type": "NGRAM", "min_gram": 2}, "must specify both min_gram and max_gram"),
        ("g", {"index_type": "NGRAM", "min_gram": "x", "max_gram": 3}, "must be an integer"),
        ("g", {"index_type": "NGRAM", "min_gram": 3, "max_gram": 2}, "invalid min_gram or max"),
        ("u", {"index_type": "NGRAM"}, "NGRAM index is not supported on INT64 field u"),
        (
            "j",
            {"index_type": "NGRAM", "json_cast_type": "varchar", "min_gram": 1, "max_gram": 2},
            "NGRAM",
        ),
        ("j", {"index_type": "NGRAM", "min_gram": 1, "max_gram": 2}, "must specify json_cast"),
        ("j", {"index_type": "NGRAM", "json_cast_type": "DOUBLE"}, "only supports VARCHAR cast"),
        ("j", {}, "json index must specify cast type"),
        ("j", {"json_path": "j['a']", "json_cast_type": "varchar"}, "INVERTED"),
        ("j", {"index_type": "BITMAP", "json_cast_type": "BOOL"}, "BITMAP"),
        ("j", {"index_type": "BITMAP", "json_cast_type": "DOUBLE"}, "not supported for BITMAP"),
        ("j", {"index_type": "STL_SORT", "json_cast_type": "DOUBLE"}, "a JSON path index is"),
        ("j", {"json_cast_type": "ARRAY_INT64"}, "json_cast_type ARRAY_INT64 is not supported"),
        ("j", {"json_cast_type": "JSON"}, "json_cast_type JSON is not supported by Vectide"),
        (
            "j",
            {"json_cast_type": "DOUBLE", "json_cast_function": "STRING_TO_DOUBLE"},
            "json_cast_function is not supported by Vectide",
        ),
        ("j", {"json_path": "k['a']", "json_cast_type": "BOOL"}, "not a path of JSON field j"),
        ("j", {"json_path": "j[", "json_cast_type": "BOOL"}, "json_path 'j\\[' is not a path"),
        ("u", {"index_type": "HYBRID"}, "invalid index type: HYBRID for INT64 field u"),
    ],
)
def test_scalar_index_types_follow_milvus_rules(name, params, expected):
    field = schema().field(name)
    if expected.isupper():
        assert scalar_index_type(field, params) == expected
        assert "metric_type" not in params and "index_type" not in params
    else:
        with pytest.raises(MilvusError, match=expected):
            scalar_index_type(field, params)


def test_a_json_path_index_is_named_by_its_path_in_canonical_form():
    params = {"json_path": "j[ 'a' ][0]", "json_cast_type": "double"}
    scalar_index_type(schema().field("j"), params)
    assert params == {"json_path": 'j["a"][0]', "json_cast_type": "DOUBLE"}
    index = IndexInfo(1, "ja", "j", "INVERTED", "", params)
    assert index.scalar_entry() == ('j["a"][0]', "DOUBLE")
    assert IndexInfo(2, "s", "s", "TRIE", "").scalar_entry() == ("s", "TRIE")
    ngram = {"json_path": 'j["t"]', "json_cast_type": "VARCHAR", "min_gram": "2", "max_gram": "3"}
    assert IndexInfo(3, "jt", "j", "NGRAM", "", ngram).scalar_entry() == ('j["t"]', "NGRAM:2:3")


def test_bitmap_on_an_array_of_floats_is_refused_naming_the_elements():
    field = FieldSchema(1, "xs", DataType.ARRAY, element_type=DataType.DOUBLE)
    with pytest.raises(MilvusError, match="BITMAP index is not supported on ARRAY of DOUBLE"):
        scalar_index_type(field, {"index_type": "BITMAP"})


def test_reads_carry_the_scalar_indexes_over_the_internal_rpc():
    from vectide.services.common.rpc import codec
    from vectide.services.common.rpc import types as _types  # noqa: F401  (registers the RPC types)

    request = ShardQueryRequest(1, ["ch"], 0, 1.0, scalar_indexes={"age": "STL_SORT"})
    assert codec.decode(codec.encode(request)).scalar_indexes == {"age": "STL_SORT"}


def test_a_key_of_the_dynamic_field_is_indexed_as_its_json_path():
    """``add_index("color", ...)`` on a collection with a dynamic field indexes
    ``$meta["color"]``, as Milvus does; a second index on that path is refused."""
    h = Harness()
    client_schema = MilvusClient.create_schema(enable_dynamic_field=True)
    client_schema.add_field("id", ClientType.INT64, is_primary=True)
    client_schema.add_field("v", ClientType.FLOAT_VECTOR, dim=2)
    create = Prepare.create_collection_request("dyn", client_schema)
    assert MilvusService(h.proxy).CreateCollection(create, Context()).code == 0
    h.proxy.create_index("dyn", "color", "ix_color", {"json_cast_type": "varchar"})
    [index] = h.proxy.describe_index("dyn", "ix_color")
    assert (index.field_name, index.index_type) == ("$meta", "INVERTED")
    assert index.scalar_entry() == ('$meta["color"]', "VARCHAR")
    info = h.proxy.meta.get("dyn")
    assert info.scalar_indexes() == {'$meta["color"]': "VARCHAR"}
    with pytest.raises(MilvusError, match="at most one distinct index"):
        h.proxy.create_index(
            "dyn", "$meta", "ix2", {"json_path": "$meta['color']", "json_cast_type": "BOOL"}
        )
