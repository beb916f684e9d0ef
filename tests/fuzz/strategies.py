"""Hypothesis strategies over the protobuf requests of the main Milvus RPCs.

Values are drawn near what a real client sends (the target collections, their field names,
small dims) and far from it (unknown names and enum values, NaN and infinities, extreme
integers, nested and malformed filters, vectors of the wrong size), so that requests get past
the first checks and reach deeper validation. Mutations never name the writer's collection:
its rows must all survive the run (reads may target it).
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

#: the collection the fuzzer may write, delete and index; the writer's one it only reads
VICTIM, WRITER = "fuzz_victim", "fuzz_writer"
DIM = 4
FIELDS = ("id", "vector", "title", "n", "$meta", "")

names = st.one_of(
    st.sampled_from([VICTIM, VICTIM, "", "no_such_collection"]),
    st.text(max_size=40),
)
read_names = st.one_of(names, st.just(WRITER))
field_names = st.one_of(st.sampled_from(FIELDS), st.text(max_size=12))
int64s = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, -1, 1, 2**63 - 1, -(2**63)])
)
floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
enum_ints = st.one_of(st.integers(-5, 300), st.integers(-(2**31), 2**31 - 1))
data_types = st.one_of(st.sampled_from(schema_pb2.DataType.values()), enum_ints)
consistency = st.one_of(st.sampled_from(common_pb2.ConsistencyLevel.values()), enum_ints)

_atoms = st.sampled_from(
    ["id > 0", "id in [1, 2, 3]", 'title like "a%"', "n == 1", "vector > 1", "x", "1", "", "(",
     'title == "\\u00"', "id in []", "n / 0 > 1", "id == 1.5e400", "json_contains(x, 1)",
     "array_length(n) == 1", "{p} > 1", "not", "id ==", "$meta['k'] == 1"]
)  # fmt: skip
filters = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"{a} and {b}", inner, inner),
        st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
        st.builds(lambda a, n: "(" * n + a + ")" * n, inner, st.integers(0, 200)),
    ),
    max_leaves=12,
) | st.text(max_size=200)


def _kv(key: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[common_pb2.KeyValuePair]:
    return st.builds(common_pb2.KeyValuePair, key=st.just(key), value=values)


_json_ish = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(['"L2"', '"COSINE"', '"FOO"', "null", "[]", "{}", '{"nprobe": -1}', "{", ""]),
    st.text(max_size=20),
)
search_params = st.lists(
    st.one_of(
        _kv("topk", st.one_of(st.integers(-5, 20_000).map(str), _json_ish)),
        _kv("offset", st.one_of(st.integers(-5, 20_000).map(str), _json_ish)),
        _kv("anns_field", st.one_of(st.sampled_from(['"vector"', '"title"', '""']), _json_ish)),
        _kv("metric_type", _json_ish),
        _kv("round_decimal", _json_ish),
        _kv("params", st.sampled_from(['{"radius": 1, "range_filter": 2}', '{"ef": 0}', "x"])),
        _kv("iterator", _json_ish),
        _kv("group_by_field", _json_ish),
    ),
    max_size=6,
)


def _packed(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


vectors = st.lists(floats, min_size=0, max_size=3 * DIM)
vector_bytes = st.one_of(
    st.lists(floats, min_size=DIM, max_size=DIM).map(_packed),
    vectors.map(_packed),
    st.binary(max_size=24),
)
placeholder_groups = st.one_of(
    st.builds(
        lambda values, kind, tag: common_pb2.PlaceholderGroup(
            placeholders=[common_pb2.PlaceholderValue(tag=tag, type=kind, values=values)]
        ).SerializeToString(),
        st.lists(vector_bytes, max_size=5),
        st.one_of(st.sampled_from(common_pb2.PlaceholderType.values()), enum_ints),
        st.sampled_from(["$0", "", "$1"]),
    ),
    st.binary(max_size=64),
)


def _scalars(kind: str, values: list[Any]) -> schema_pb2.ScalarField:
    array = {
        "long_data": schema_pb2.LongArray,
        "int_data": schema_pb2.IntArray,
        "string_data": schema_pb2.StringArray,
        "float_data": schema_pb2.FloatArray,
        "bool_data": schema_pb2.BoolArray,
        "json_data": schema_pb2.JSONArray,
    }[kind]
    return schema_pb2.ScalarField(**{kind: array(data=values)})


scalar_fields = st.one_of(
    st.lists(int64s, max_size=6).map(lambda v: _scalars("long_data", v)),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6).map(lambda v: _scalars("int_data", v)),
    st.lists(st.text(max_size=300), max_size=6).map(lambda v: _scalars("string_data", v)),
    st.lists(floats, max_size=6).map(lambda v: _scalars("float_data", v)),
    st.lists(st.booleans(), max_size=6).map(lambda v: _scalars("bool_data", v)),
    st.lists(st.binary(max_size=20), max_size=6).map(lambda v: _scalars("json_data", v)),
)
vector_fields = st.builds(
    lambda dim, data: schema_pb2.VectorField(
        dim=dim, float_vector=schema_pb2.FloatArray(data=data)
    ),
    st.one_of(st.just(DIM), st.integers(-2, 70_000)),
    vectors,
)


@st.composite
def field_data(draw: st.DrawFn) -> schema_pb2.FieldData:
    data = schema_pb2.FieldData(
        type=draw(data_types), field_name=draw(field_names), is_dynamic=draw(st.booleans())
    )
    if draw(st.booleans()):
        data.scalars.CopyFrom(draw(scalar_fields))
    else:
        data.vectors.CopyFrom(draw(vector_fields))
    return data


def _rows(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "collection_name": draw(names),
        "partition_name": draw(st.sampled_from(["", "_default", "nope"])),
        "fields_data": draw(st.lists(field_data(), max_size=5)),
        "num_rows": draw(st.one_of(st.integers(0, 8), st.integers(0, 2**32 - 1))),
    }


@st.composite
def insert_requests(draw: st.DrawFn) -> milvus_pb2.InsertRequest:
    return milvus_pb2.InsertRequest(**_rows(draw))


@st.composite
def upsert_requests(draw: st.DrawFn) -> milvus_pb2.UpsertRequest:
    return milvus_pb2.UpsertRequest(**_rows(draw), partial_update=draw(st.booleans()))


@st.composite
def search_requests(draw: st.DrawFn) -> milvus_pb2.SearchRequest:
    return milvus_pb2.SearchRequest(
        collection_name=draw(read_names),
        partition_names=draw(st.lists(st.sampled_from(["_default", "nope", ""]), max_size=2)),
        dsl=draw(st.one_of(st.just(""), filters)),
        dsl_type=draw(st.sampled_from([0, 1, 7])),
        placeholder_group=draw(placeholder_groups),
        output_fields=draw(st.lists(st.one_of(field_names, st.just("*")), max_size=3)),
        search_params=draw(search_params),
        nq=draw(st.integers(-1, 20_000)),
        guarantee_timestamp=draw(st.sampled_from([0, 1, 2, 2**63 - 1])),
        consistency_level=draw(consistency),
        use_default_consistency=draw(st.booleans()),
    )


@st.composite
def query_requests(draw: st.DrawFn) -> milvus_pb2.QueryRequest:
    params = st.lists(
        st.one_of(_kv("limit", _json_ish), _kv("offset", _json_ish), _kv("iterator", _json_ish)),
        max_size=3,
    )
    return milvus_pb2.QueryRequest(
        collection_name=draw(read_names),
        expr=draw(filters),
        output_fields=draw(st.lists(st.one_of(field_names, st.just("count(*)")), max_size=3)),
        query_params=draw(params),
        guarantee_timestamp=draw(st.sampled_from([0, 1, 2, 2**63 - 1])),
        consistency_level=draw(consistency),
        use_default_consistency=draw(st.booleans()),
    )


@st.composite
def delete_requests(draw: st.DrawFn) -> milvus_pb2.DeleteRequest:
    return milvus_pb2.DeleteRequest(
        collection_name=draw(names),
        partition_name=draw(st.sampled_from(["", "_default", "nope"])),
        expr=draw(filters),
        consistency_level=draw(consistency),
    )


@st.composite
def field_schemas(draw: st.DrawFn) -> schema_pb2.FieldSchema:
    params = st.lists(
        st.one_of(
            _kv("dim", st.one_of(st.integers(-2, 70_000).map(str), st.text(max_size=4))),
            _kv("max_length", st.one_of(st.integers(-2, 70_000).map(str), st.text(max_size=4))),
        ),
        max_size=2,
    )
    return schema_pb2.FieldSchema(
        name=draw(field_names),
        data_type=draw(data_types),
        is_primary_key=draw(st.booleans()),
        autoID=draw(st.booleans()),
        type_params=draw(params),
        nullable=draw(st.booleans()),
        is_partition_key=draw(st.booleans()),
    )


@st.composite
def create_collection_requests(draw: st.DrawFn) -> milvus_pb2.CreateCollectionRequest:
    name = draw(
        st.one_of(st.text(max_size=300), st.from_regex(r"fz_[a-z0-9]{1,10}", fullmatch=True))
    )
    schema = schema_pb2.CollectionSchema(
        name=draw(st.one_of(st.just(name), st.text(max_size=10))),
        fields=draw(st.lists(field_schemas(), max_size=5)),
        enable_dynamic_field=draw(st.booleans()),
    ).SerializeToString()
    return milvus_pb2.CreateCollectionRequest(
        collection_name=name,
        schema=draw(st.one_of(st.just(schema), st.binary(max_size=40))),
        shards_num=draw(st.one_of(st.integers(-2, 4), st.integers(-(2**31), 2**31 - 1))),
        consistency_level=draw(consistency),
    )


@st.composite
def create_index_requests(draw: st.DrawFn) -> milvus_pb2.CreateIndexRequest:
    params = st.lists(
        st.one_of(
            _kv(
                "index_type", st.sampled_from(["HNSW", "IVF_FLAT", "FLAT", "AUTOINDEX", "NOPE", ""])
            ),
            _kv("metric_type", st.sampled_from(["L2", "IP", "COSINE", "HAMMING", "x", ""])),
            _kv("params", _json_ish),
            _kv("M", _json_ish),
            _kv("nlist", _json_ish),
        ),
        max_size=4,
    )
    return milvus_pb2.CreateIndexRequest(
        collection_name=draw(names),
        field_name=draw(field_names),
        index_name=draw(st.one_of(st.just(""), st.text(max_size=10))),
        extra_params=draw(params),
    )


#: the RPC each request type goes to
RPCS: dict[str, st.SearchStrategy[Any]] = {
    "Insert": insert_requests(),
    "Upsert": upsert_requests(),
    "Search": search_requests(),
    "Query": query_requests(),
    "Delete": delete_requests(),
    "CreateCollection": create_collection_requests(),
    "CreateIndex": create_index_requests(),
    "DescribeCollection": st.builds(
        milvus_pb2.DescribeCollectionRequest, collection_name=read_names
    ),
    "LoadCollection": st.builds(
        milvus_pb2.LoadCollectionRequest, collection_name=names, replica_number=enum_ints
    ),
    "HasCollection": st.builds(milvus_pb2.HasCollectionRequest, collection_name=read_names),
    "GetCollectionStatistics": st.builds(
        milvus_pb2.GetCollectionStatisticsRequest, collection_name=read_names
    ),
}

calls = st.sampled_from(sorted(RPCS)).flatmap(
    lambda rpc: st.tuples(st.just(rpc), RPCS[rpc], st.booleans(), st.binary(max_size=8))
)
"""(rpc, request, mutate, noise): with ``mutate`` the request's bytes are cut and spliced
with ``noise`` before sending, which reaches the server's message parser."""
