"""Full-text search: analyzers, the BM25 function at insert, and BM25 scores equal to the
formula computed here independently, over growing rows, sealed segments, a split between
both, and after deletes; the schema rules Milvus applies; and what is refused."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from pymilvus import DataType as ClientType
from pymilvus import Function, FunctionType, MilvusClient
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from benchmarks.search_path import Context
from vectide.services.common import analyzer, results
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import DataType, FieldColumn
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.proxy import convert
from vectide.services.proxy.dql import QuerySpec
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.querynode import sparse
from vectide.services.testing import Harness

DOCS = [
    "The quick brown fox jumps over the lazy dog",
    "A quick brown dog outpaces a quick fox",
    "Lazy afternoons are for sleeping dogs",
    "Foxes are quick and clever animals",
    "Information retrieval ranks documents by relevance",
    "BM25 ranks documents with term frequency and inverse document frequency",
    "The dog barks",
    "Nothing in this sentence matters",
]


# -- analyzers --------------------------------------------------------------------------------


def test_the_standard_analyzer_splits_unicode_words_and_lowercases():
    standard = analyzer.analyzer_of(None)
    # as milvus-lite's: apostrophes, dots and dashes split words, underscores do not
    assert standard.terms("Hello,World! Don't stop: 3.14 café snake_case e-mail") == [
        *("hello", "world", "don", "t", "stop", "3", "14", "café", "snake_case", "e", "mail")
    ]
    assert analyzer.analyzer_of('{"type": "standard", "stop_words": ["the"]}').terms(
        "The end of THE story"
    ) == ["end", "of", "story"]


def test_the_english_analyzer_drops_stop_words_and_stems():
    english = analyzer.analyzer_of({"type": "english"})
    assert english.terms("The running dogs are jumping") == ["run", "dog", "jump"]


def test_custom_chains_apply_their_filters_in_order():
    custom = analyzer.analyzer_of(
        {
            "tokenizer": "whitespace",
            "filter": ["lowercase", "asciifolding", "alphanumonly", {"type": "length", "max": 5}],
        }
    )
    assert custom.terms("Café AU-lait Extraordinary x") == ["cafe", "x"]


@pytest.mark.parametrize(
    "params, named",
    [
        ({"type": "chinese"}, "analyzer type 'chinese' is not supported"),
        ({"tokenizer": "jieba"}, "tokenizer 'jieba' is not supported"),
        ({"filter": ["cnalphanumonly"]}, "filter 'cnalphanumonly' is not supported"),
        ({"type": "standard", "tokenizer": "x"}, "does not take tokenizer"),
        ({"filter": [{"type": "length"}]}, "needs max"),
        ("{oops", "not valid JSON"),
    ],
)
def test_analyzers_vectide_does_not_offer_are_refused_by_name(params, named):
    with pytest.raises(analyzer.AnalyzerError, match=re.escape(named)):
        analyzer.analyzer_of(params)


def test_a_text_becomes_its_term_counts():
    row = analyzer.analyzer_of(None).sparse_row("b a B c")
    indices, values = np.frombuffer(row, "<u4")[0::2], np.frombuffer(row, "<f4")[1::2]
    counts = dict(zip(indices.tolist(), values.tolist(), strict=True))
    assert counts == {analyzer.term_index(t): n for t, n in {"a": 1, "b": 2, "c": 1}.items()}
    assert analyzer.analyzer_of(None).sparse_row(None) == b""


# -- the BM25 function end to end through the service ---------------------------------------


def bm25_schema(analyzer_params: dict | None = None):
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    extra = {"analyzer_params": analyzer_params} if analyzer_params else {}
    schema.add_field("text", ClientType.VARCHAR, max_length=256, enable_analyzer=True, **extra)
    schema.add_field("sparse", ClientType.SPARSE_FLOAT_VECTOR)
    schema.add_field("dense", ClientType.FLOAT_VECTOR, dim=2)
    bm25 = Function(
        "bm25", FunctionType.BM25, input_field_names=["text"], output_field_names=["sparse"]
    )
    schema.add_function(bm25)
    return schema


def bm25_function(source: str, target: str, name: str = "bm25") -> Function:
    return Function(
        name, FunctionType.BM25, input_field_names=[source], output_field_names=[target]
    )


@pytest.fixture(params=["postings", "scanned"])
def docs(request, monkeypatch):
    """A harness holding DOCS (keys 0..7) in a collection with a BM25 function, indexed and
    loaded; the service to call. Its sparse rows are searched through sorted postings, or
    scanned as a tail (a few rows never reach the size at which the tail is sorted in)."""
    if request.param == "postings":
        monkeypatch.setattr(sparse, "_SCANNED_TAIL", 0)
    h = Harness()
    service = MilvusService(h.proxy)
    create = Prepare.create_collection_request("docs", bm25_schema(), consistency_level="Strong")
    assert service.CreateCollection(create, Context()).code == 0
    h.proxy.create_index("docs", "sparse", "s", {"index_type": "SPARSE_INVERTED_INDEX"})
    h.proxy.create_index("docs", "dense", "d", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("docs")
    h.tick()
    insert(h, dict(enumerate(DOCS)))
    return h, service


def insert(h: Harness, texts: dict[int, str], collection: str = "docs") -> None:
    keys = list(texts)
    columns = {
        "id": FieldColumn(100, "id", DataType.INT64, np.array(keys, dtype=np.int64)),
        "text": FieldColumn(101, "text", DataType.VARCHAR, list(texts.values())),
        "dense": FieldColumn(
            103, "dense", DataType.FLOAT_VECTOR, np.ones((len(keys), 2), np.float32), 2
        ),
    }
    h.proxy.insert(collection, "", columns, len(keys))
    h.tick()
    h.pump()


def search_request(
    data: list,
    *,
    anns_field: str = "sparse",
    limit: int = 3,
    expr: str | None = None,
    output_fields: tuple[str, ...] = (),
    params: dict | None = None,
):
    """The SearchRequest pymilvus sends for ``data`` (query texts, or vectors) on ``docs``."""
    return Prepare.search_requests_with_expr(
        collection_name="docs",
        anns_field=anns_field,
        param={"metric_type": "BM25", **(params or {})},
        limit=limit,
        data=data,
        expr=expr,
        output_fields=list(output_fields),
        expr_params={},
        consistency_level="Strong",
    )


def search(service: MilvusService, texts: list[str], limit: int = 10, **param) -> list[dict]:
    request = search_request(texts, limit=limit, output_fields=("text",), params=param)
    reply = service.Search(request, Context())
    assert reply.status.code == 0, reply.status.reason
    res = reply.results
    ids, scores, out = list(res.ids.int_id.data), list(res.scores), []
    start = 0
    for n in res.topks:
        out.append(dict(zip(ids[start : start + n], scores[start : start + n], strict=True)))
        start += n
    return out


def reference(query: str, docs: dict[int, str], k1: float = 1.2, b: float = 0.75) -> dict:
    """BM25 as Lucene and Milvus define it, over ``docs`` (key -> text)."""
    words = {k: re.findall(r"\w+", t.lower()) for k, t in docs.items()}
    avgdl = sum(len(w) for w in words.values()) / len(words)
    scores = {}
    for key, terms in words.items():
        tf, score = Counter(terms), 0.0
        for term, q in Counter(re.findall(r"\w+", query.lower())).items():
            df = sum(term in w for w in words.values())
            idf = math.log(1 + (len(words) - df + 0.5) / (df + 0.5))
            norm = k1 * (1 - b + b * len(terms) / avgdl)
            score += q * idf * tf[term] * (k1 + 1) / (tf[term] + norm) if tf[term] else 0.0
        if score:
            scores[key] = score
    return scores


def assert_scores(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for key, score in expected.items():
        assert got[key] == pytest.approx(score, rel=1e-5), key
    ranked = sorted(got, key=lambda k: -got[k])
    assert [expected[k] for k in ranked] == sorted(expected.values(), reverse=True)


QUERIES = ["quick fox", "lazy dog dog", "documents frequency", "zebra"]


def test_growing_rows_score_as_the_formula(docs):
    _, service = docs
    corpus = dict(enumerate(DOCS))
    for query, got in zip(QUERIES, search(service, QUERIES), strict=True):
        assert_scores(got, reference(query, corpus))
    assert search(service, ["zebra"]) == [{}]  # no row shares a term: no hit


def test_sealed_and_growing_rows_share_the_shards_statistics(docs):
    h, service = docs
    h.proxy.flush(["docs"])
    for _ in range(3):
        h.step()
    later = {8: "quick quick fox", 9: "a dog reads documents"}
    insert(h, later)  # growing beside the sealed segment
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    [shard] = node._shards.values()
    assert sum(s.num_rows for s in shard.sealed.values()) == len(DOCS)
    assert shard.store.num_rows == 2
    corpus = {**dict(enumerate(DOCS)), **later}
    for query, got in zip(QUERIES, search(service, QUERIES), strict=True):
        assert_scores(got, reference(query, corpus))
    h.proxy.delete("docs", "", "id in [0, 3]")
    h.tick()
    h.pump()
    left = {k: t for k, t in corpus.items() if k not in (0, 3)}
    for query, got in zip(QUERIES, search(service, QUERIES), strict=True):
        assert_scores(got, reference(query, left))


def test_k1_and_b_come_from_the_search_or_the_index(docs):
    _, service = docs
    corpus = dict(enumerate(DOCS))
    [got] = search(service, ["quick fox"], params={"bm25_k1": 2.0, "bm25_b": 0.3})
    assert_scores(got, reference("quick fox", corpus, k1=2.0, b=0.3))
    [top] = search(service, ["quick fox"], limit=2)
    assert len(top) == 2


def test_output_fields_filters_and_hybrid_search_work_on_bm25(docs):
    _, service = docs
    request = search_request(["quick dog"], expr="id > 0", output_fields=("*",))
    reply = service.Search(request, Context())
    assert reply.status.code == 0, reply.status.reason
    assert 0 not in reply.results.ids.int_id.data
    names = {f.field_name for f in reply.results.fields_data}
    assert "text" in names and "sparse" not in names  # '*' leaves function outputs out
    assert results.normalizer("BM25", True, True)(np.float32(1.0)) == pytest.approx(0.5)


def test_an_insert_may_not_carry_the_output_and_searches_need_texts(docs):
    h, service = docs
    columns = {
        "id": FieldColumn(100, "id", DataType.INT64, np.array([99])),
        "text": FieldColumn(101, "text", DataType.VARCHAR, ["x"]),
        "sparse": FieldColumn(102, "sparse", DataType.SPARSE_FLOAT_VECTOR, [b""]),
        "dense": FieldColumn(103, "dense", DataType.FLOAT_VECTOR, np.ones((1, 2), np.float32), 2),
    }
    with pytest.raises(MilvusError, match="output of function bm25"):
        h.proxy.insert("docs", "", columns, 1)
    request = search_request([{1: 0.5}])
    reply = service.Search(request, Context())
    assert reply.status.code != 0 and "search it with texts" in reply.status.reason
    query = Prepare.query_request("docs", "id >= 0", ["sparse"], [], consistency_level="Strong")
    answer = service.Query(query, Context())
    assert "not allowed to retrieve raw data of field sparse" in answer.status.reason


def test_describe_returns_the_function_and_the_analyzer():
    h = Harness()
    service = MilvusService(h.proxy)
    params = {"type": "english"}
    create = Prepare.create_collection_request("docs", bm25_schema(params))
    assert service.CreateCollection(create, Context()).code == 0
    described = convert.describe_response(h.proxy.describe_collection("docs")).schema
    [fn] = described.functions
    assert (fn.name, list(fn.input_field_names), list(fn.output_field_names)) == (
        "bm25",
        ["text"],
        ["sparse"],
    )
    assert fn.type == 1 and list(fn.output_field_ids) == [102]
    fields = {f.name: f for f in described.fields}
    assert fields["sparse"].is_function_output
    text_params = {kv.key: kv.value for kv in fields["text"].type_params}
    assert text_params["enable_analyzer"] == "true"
    assert '"english"' in text_params["analyzer_params"]


def schema_refused(schema) -> str:
    h = Harness()
    request = Prepare.create_collection_request("c", schema)
    status = MilvusService(h.proxy).CreateCollection(request, Context())
    assert status.code != 0
    return status.reason


def test_schemas_milvus_refuses_are_refused():
    no_analyzer = MilvusClient.create_schema()
    no_analyzer.add_field("id", ClientType.INT64, is_primary=True)
    no_analyzer.add_field("text", ClientType.VARCHAR, max_length=16)
    no_analyzer.add_field("sparse", ClientType.SPARSE_FLOAT_VECTOR)
    no_analyzer.add_function(bm25_function("text", "sparse"))
    assert "with enable_analyzer=True" in schema_refused(no_analyzer)
    dense_out = MilvusClient.create_schema()
    dense_out.add_field("id", ClientType.INT64, is_primary=True)
    dense_out.add_field("text", ClientType.VARCHAR, max_length=16, enable_analyzer=True)
    dense_out.add_field("vec", ClientType.FLOAT_VECTOR, dim=2)
    dense_out.add_function(bm25_function("text", "vec"))
    assert "must be a SparseFloatVector field" in schema_refused(dense_out)
    chinese = bm25_schema({"type": "chinese"})
    assert "analyzer type 'chinese' is not supported" in schema_refused(chinese)


def test_bm25_is_the_metric_of_function_outputs_only(docs):
    h, _ = docs
    with pytest.raises(MilvusError, match="BM25 is the metric of a BM25 function's output"):
        h.proxy.create_index("docs", "sparse", "s2", {"metric_type": "IP"})
    with pytest.raises(MilvusError, match="BM25 is the metric"):
        h.proxy.create_index("docs", "dense", "d2", {"index_type": "FLAT", "metric_type": "BM25"})


def test_placeholder_types_pymilvus_sends_for_texts():
    request = search_request(["words"], limit=1)
    group = common_pb2.PlaceholderGroup.FromString(request.placeholder_group)
    assert group.placeholders[0].type == common_pb2.PlaceholderType.VarChar


def test_a_sparse_column_drops_its_head_after_handoff():
    column = sparse.SparseColumn()
    rows = [analyzer.analyzer_of(None).sparse_row(t) for t in ("a b", "b c", "c d d")]
    column.append(rows[:2])
    column.append(rows[2:])
    before = column.nbytes
    column.drop_head(2)
    assert column.view() == rows[2:] and column.nbytes < before
    assert column.lengths().tolist() == [3.0]
    query = [analyzer.analyzer_of(None).sparse_row("d")]
    scores, found = column.search(query, 5, np.ones(1, bool), {})
    assert found.tolist() == [[0]] and scores.tolist() == [[2.0]]


def test_kafka_ingest_and_rest_rows_leave_the_output_to_the_function(docs):
    import json

    from vectide.services.ingest.decode import RecordDecoder, RecordError, avro_schema
    from vectide.services.proxy import rest_rows

    h, _ = docs
    info = h.proxy.meta.get("docs")
    decoder = RecordDecoder(info.schema)
    record = {"id": 20, "text": "a kafka record", "dense": [0.0, 1.0]}
    row = decoder.decode(None, json.dumps(record).encode())
    assert set(row.values) == {"text", "dense"}  # the proxy's insert adds the sparse column
    with pytest.raises(RecordError, match="computed by a function"):
        decoder.decode(None, json.dumps({**record, "sparse": {"1": 1.0}}).encode())
    assert "sparse" not in {f["name"] for f in avro_schema(info.schema)["fields"]}
    proto = convert.schema_to_proto(info.schema)
    columns = rest_rows.columns([record], proto)
    assert {c.field_name for c in columns} == {"id", "text", "dense"}
    with pytest.raises(MilvusError, match="output of a function"):
        rest_rows.columns([{**record, "sparse": {"1": 1.0}}], proto)


def test_multi_language_analyzers_are_refused_not_ignored():
    schema = bm25_schema()
    schema.fields[1].params["multi_analyzer_params"] = {"analyzers": {"default": {}}}
    assert "multi-language analyzers are not supported" in schema_refused(schema)


# -- TEXT_MATCH ---------------------------------------------------------------------------------


def match_schema():
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field(
        "text", ClientType.VARCHAR, max_length=256, enable_analyzer=True, enable_match=True
    )
    schema.add_field("plain", ClientType.VARCHAR, max_length=256, nullable=True)
    schema.add_field("dense", ClientType.FLOAT_VECTOR, dim=2)
    return schema


def matched(h: Harness, expr: str) -> list[int]:
    spec = QuerySpec(
        collection_name="m",
        expr=expr,
        output_fields=[],
        use_default_consistency=False,
        consistency_level=ConsistencyLevel.STRONG,
    )
    return sorted(int(pk) for pk in h.proxy.query(spec)[1].pks)


def test_text_match_finds_rows_holding_any_of_the_words_growing_sealed_and_after_handoff():
    h = Harness()
    create = Prepare.create_collection_request("m", match_schema())
    assert MilvusService(h.proxy).CreateCollection(create, Context()).code == 0
    h.proxy.create_index("m", "dense", "d", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.create_index("m", "id", "i", {"index_type": "STL_SORT"})
    h.proxy.load_collection("m")
    h.tick()
    insert(h, dict(enumerate(DOCS)), "m")
    expected = {"fox": [0, 1], "DOG barks": [0, 1, 6], "zebra": [], "lazy afternoons": [0, 2]}
    for words, keys in expected.items():
        assert matched(h, f"text_match(text, '{words}')") == keys, words
    assert matched(h, "id > 0 and text_match(text, 'dog')") == [1, 6]  # indexed candidates
    assert matched(h, "not text_match(text, 'the')") == [1, 2, 3, 4, 5, 7]
    h.proxy.flush(["m"])
    for _ in range(3):
        h.step()
    insert(h, {10: "a fox again"}, "m")
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    [shard] = node._shards.values()
    assert sum(s.num_rows for s in shard.sealed.values()) == len(DOCS)  # handed off
    assert matched(h, "text_match(text, 'fox')") == [0, 1, 10]
    insert(h, {11: "foxes are not a fox"}, "m")  # the growing store's index grows
    assert matched(h, "text_match(text, 'fox')") == [0, 1, 10, 11]
    with pytest.raises(MilvusError, match="field plain does not enable match"):
        matched(h, "text_match(plain, 'fox')")


def test_phrase_match_and_a_minimum_of_words_growing_and_sealed():
    h = Harness()
    create = Prepare.create_collection_request("m", match_schema())
    assert MilvusService(h.proxy).CreateCollection(create, Context()).code == 0
    h.proxy.create_index("m", "dense", "d", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("m")
    h.tick()
    insert(h, dict(enumerate(DOCS)), "m")
    expected = {
        "phrase_match(text, 'quick brown')": [0, 1],
        "phrase_match(text, 'QUICK, fox!')": [1],  # analyzed as the text is: "a quick fox"
        "phrase_match(text, 'quick fox', 1)": [0, 1],  # "quick brown fox", "a quick fox"
        "phrase_match(text, 'fox quick', 2)": [1],  # "... a quick fox": swapped, adjacent
        "phrase_match(text, 'dog')": [0, 1, 6],
        "phrase_match(text, '')": [],
        "text_match(text, 'quick dog lazy', minimum_should_match=2)": [0, 1],
        "text_match(text, 'quick dog lazy', minimum_should_match=3)": [0],
        "text_match(text, 'quick quick', minimum_should_match=2)": [],  # one distinct term
        "not phrase_match(text, 'the dog') and id < 7": [0, 1, 2, 3, 4, 5],
        "phrase_match(text, 'the dog', 1)": [0, 6],  # "the lazy dog", "the dog barks"
    }
    for expr, keys in expected.items():
        assert matched(h, expr) == keys, expr
    h.proxy.flush(["m"])
    for _ in range(3):
        h.step()
    insert(h, {10: "the lazy brown dog"}, "m")
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    [shard] = node._shards.values()
    assert sum(s.num_rows for s in shard.sealed.values()) == len(DOCS)  # handed off
    assert matched(h, "phrase_match(text, 'brown dog')") == [1, 10]
    assert matched(h, "phrase_match(text, 'lazy dog', 1)") == [0, 10]
    with pytest.raises(MilvusError, match="field plain does not enable match: phrase_match"):
        matched(h, "phrase_match(plain, 'fox')")


def test_a_schema_with_functions_crosses_the_rpc_codec_and_the_catalog(docs):
    from vectide.services.common.rpc import codec, types  # noqa: F401 (registers the types)
    from vectide.services.rootcoord.meta_table import collection_from_json, collection_to_json

    h, _ = docs
    info = h.proxy.meta.get("docs")
    assert codec.decode(codec.encode(info)).schema.functions == info.schema.functions
    assert collection_from_json(collection_to_json(info)).schema == info.schema


# -- statistics across query nodes --------------------------------------------------------------


def sparse_collection():
    from tests.unit.test_querynode import VCH
    from vectide.services.common.schema import (
        CollectionInfo,
        CollectionSchema,
        FieldSchema,
        IndexInfo,
    )

    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "sv", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
        ],
    )
    index = IndexInfo(1, "sv", "sv", "SPARSE_INVERTED_INDEX", "BM25", {})
    return CollectionInfo(
        7,
        "c",
        schema,
        1,
        [VCH],
        ["c-dml_0"],
        ConsistencyLevel.STRONG,
        1,
        {"c-dml_0": 0},
        indexes=[index],
    )


def test_a_leader_weighs_queries_with_the_statistics_of_segments_other_nodes_serve():
    """Every row of the shard sits in a sealed segment node 2 serves; the leader holds none,
    yet scores by the whole shard's IDF and average length (asked of node 2 first)."""
    from tests.fakes import DictStore
    from tests.unit.test_querynode import VCH, pack, persisted
    from tests.unit.test_segment_placement import Peers
    from vectide.services.common.msgstream.message import InsertMsg
    from vectide.services.common.requests import ShardSearchRequest
    from vectide.services.querynode.core import QueryNode

    store, peers = DictStore(), Peers()
    leader, two = (peers.add(QueryNode(n, binlogs=store)) for n in (1, 2))
    leader.watch(sparse_collection(), VCH)
    standard = analyzer.analyzer_of(None)
    keys = np.arange(len(DOCS), dtype=np.int64)
    rows = InsertMsg(
        5,
        5,
        0,
        7,
        1,
        9,
        VCH,
        keys,
        np.zeros(len(keys), np.int64),
        np.full(len(keys), 5),
        [
            FieldColumn(
                101, "sv", DataType.SPARSE_FLOAT_VECTOR, [standard.sparse_row(t) for t in DOCS]
            )
        ],
    )
    leader.apply(VCH, pack(0, 10, rows))
    assert two.host_segment(sparse_collection(), VCH, persisted([rows], store), [])
    leader.attach_segment(VCH, 9, 2, since_ts=0)
    assert leader.load_report().rows == 0  # every row handed off to node 2
    query = standard.sparse_row("quick fox")
    params = {"bm25_k1": 1.2, "bm25_b": 0.75}
    hits = leader.search(
        ShardSearchRequest(7, [VCH], "sv", [query], "BM25", 5, 10, 0.1, search_params=params)
    )
    expected = reference("quick fox", dict(enumerate(DOCS)))
    assert_scores(
        dict(zip(np.asarray(hits.pks).tolist(), hits.scores.tolist(), strict=True)), expected
    )


def test_a_search_of_a_scalar_field_is_refused_clearly(docs):
    """Found by the fuzzer: a VarChar ``anns_field`` (with text data) crashed the handler
    with a KeyError instead of a Milvus error."""
    _, service = docs
    request = search_request(["quick fox"], anns_field="text")
    reply = service.Search(request, Context())
    assert reply.status.code == 1100, reply.status
    assert "anns_field text is not a vector field" in reply.status.reason


def test_run_analyzer_returns_the_terms_their_places_and_hashes(docs):
    _, service = docs
    text = "The Dogs ran, naïvely"
    request = Prepare.run_analyzer([text, ""], analyzer_params={"type": "english"})
    reply = service.RunAnalyzer(request, Context())
    assert reply.status.code == 0, reply.status
    assert [[t.token for t in r.tokens] for r in reply.results] == [["dog", "ran", "naïv"], []]
    detailed = Prepare.run_analyzer(
        text, analyzer_params={"type": "english"}, with_detail=True, with_hash=True
    )
    tokens = service.RunAnalyzer(detailed, Context()).results[0].tokens
    # byte offsets of the words; "The" (position 0) is a stop word
    assert [(t.start_offset, t.end_offset, t.position) for t in tokens] == [
        (4, 8, 1),
        (9, 12, 2),
        (14, 22, 3),
    ]
    assert text.encode()[14:22].decode() == "naïvely"
    assert [t.hash for t in tokens] == [analyzer.term_index(t) for t in ("dog", "ran", "naïv")]
    # a collection's field: its own analyzer (the standard one here), the same terms a search uses
    by_field = Prepare.run_analyzer(text, collection_name="docs", field_name="text")
    tokens = service.RunAnalyzer(by_field, Context()).results[0].tokens
    assert [t.token for t in tokens] == ["the", "dogs", "ran", "naïvely"]
    refused = service.RunAnalyzer(
        Prepare.run_analyzer(text, analyzer_params={"type": "chinese"}), Context()
    )
    assert refused.status.code == 1100 and "chinese" in refused.status.reason
    no_analyzer = service.RunAnalyzer(
        Prepare.run_analyzer(text, collection_name="docs", field_name="dense"), Context()
    )
    assert "has no analyzer" in no_analyzer.status.reason


def test_functions_of_an_existing_collection_change_as_milvus_allows():
    """AddCollectionFunction and AlterCollectionFunction (Milvus 2.6) take embedding
    functions only, which Vectide does not run, so both are refused with the reason;
    DropCollectionFunction of a missing function is a no-op, of the BM25 one refused."""
    h = Harness()
    service, ctx = MilvusService(h.proxy), Context()
    create = Prepare.create_collection_request("docs", bm25_schema())
    assert service.CreateCollection(create, ctx).code == 0
    second = bm25_function("text", "sparse", name="bm25_again")
    added = service.AddCollectionFunction(
        Prepare.add_collection_function_request("docs", second), ctx
    )
    assert added.code == Code.PARAMETER_INVALID and "adding a BM25 function" in added.reason
    embedding = Function(
        "embed",
        FunctionType.TEXTEMBEDDING,
        input_field_names=["text"],
        output_field_names=["dense"],
        params={"provider": "openai", "model_name": "text-embedding-3-small"},
    )
    refused = service.AddCollectionFunction(
        Prepare.add_collection_function_request("docs", embedding), ctx
    )
    assert "TextEmbedding functions are not supported by Vectide" in refused.reason
    missing = service.AddCollectionFunction(
        Prepare.add_collection_function_request("nope", embedding), ctx
    )
    assert missing.code == Code.COLLECTION_NOT_FOUND
    altered = service.AlterCollectionFunction(
        Prepare.alter_collection_function_request("docs", "bm25", bm25_function("text", "sparse")),
        ctx,
    )
    assert "altering a BM25 function" in altered.reason
    unknown = service.AlterCollectionFunction(
        Prepare.alter_collection_function_request("docs", "embed", embedding), ctx
    )
    assert "function embed not found" in unknown.reason
    gone = Prepare.drop_collection_function_request("docs", "no_such_function")
    assert service.DropCollectionFunction(gone, ctx).code == 0
    kept = service.DropCollectionFunction(
        Prepare.drop_collection_function_request("docs", "bm25"), ctx
    )
    assert "dropping BM25 function bm25 is not supported" in kept.reason
    described = service.DescribeCollection(
        milvus_pb2.DescribeCollectionRequest(collection_name="docs"), ctx
    )
    assert [f.name for f in described.schema.functions] == ["bm25"]  # nothing changed
