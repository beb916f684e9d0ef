"""Full-text search through unmodified pymilvus and REST, as Milvus's full-text search guide
runs it: a BM25 function turns a VarChar field's text into a sparse vector, searches take
query texts, and the scores are BM25's (checked against the formula computed here) over
growing rows, after flush, release and load from the Spark data node's binlogs, and in a
hybrid search beside a dense vector."""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter

import pytest
import requests
from pymilvus import AnnSearchRequest, DataType, Function, FunctionType, MilvusException, RRFRanker

TEXTS = [
    "Information retrieval ranks documents by relevance to a query",
    "BM25 weighs term frequency against document length",
    "Vector databases search embeddings by similarity",
    "Kafka carries the log every Vectide node reads",
    "A quick brown fox jumps over the lazy dog",
    "Full text search finds documents that share the query's terms",
    "Dense vectors capture meaning, sparse vectors capture terms",
    "The data node writes binlog segments to S3",
]
QUERIES = ["documents query", "vectors terms", "Kafka log"]


def bm25(query: str, docs: dict[int, str], k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
    words = {k: re.findall(r"\w+", t.lower()) for k, t in docs.items()}
    avgdl = sum(map(len, words.values())) / len(words)
    out = {}
    for key, terms in words.items():
        tf = Counter(terms)
        score = 0.0
        for term, q in Counter(re.findall(r"\w+", query.lower())).items():
            if tf[term]:
                df = sum(term in w for w in words.values())
                idf = math.log(1 + (len(words) - df + 0.5) / (df + 0.5))
                score += (
                    q
                    * idf
                    * tf[term]
                    * (k1 + 1)
                    / (tf[term] + k1 * (1 - b + b * len(terms) / avgdl))
                )
        if score:
            out[key] = score
    return out


def check(hits: list[dict], expected: dict[int, float], limit: int) -> None:
    best = sorted(expected.items(), key=lambda kv: -kv[1])[:limit]
    assert [h["id"] for h in hits] == [k for k, _ in best]
    for hit, (_, score) in zip(hits, best, strict=True):
        assert hit["distance"] == pytest.approx(score, rel=1e-4)
        assert hit["entity"]["text"] == TEXTS[hit["id"]]


@pytest.fixture
def name(client):
    name = f"fts_{uuid.uuid4().hex[:6]}"
    yield name
    client.drop_collection(name)


def create(client, name: str) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field(
        "text", DataType.VARCHAR, max_length=1000, enable_analyzer=True, enable_match=True
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=2)
    schema.add_function(
        Function(
            name="text_bm25",
            function_type=FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["sparse"],
        )
    )
    index = client.prepare_index_params()
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    index.add_index("dense", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)


def search(client, name: str, queries: list[str], limit: int = 3) -> list[list[dict]]:
    return client.search(
        name,
        data=queries,
        anns_field="sparse",
        limit=limit,
        output_fields=["text"],
        search_params={"metric_type": "BM25"},
        consistency_level="Strong",
    )


def test_pymilvus_full_text_search_growing_flushed_and_reloaded(client, name):
    create(client, name)
    rows = [{"id": i, "text": t, "dense": [float(i), 0.0]} for i, t in enumerate(TEXTS)]
    client.insert(name, rows)
    corpus = dict(enumerate(TEXTS))
    for query, hits in zip(QUERIES, search(client, name, QUERIES), strict=True):
        check(hits, bm25(query, corpus), 3)
    described = client.describe_collection(name)
    [function] = described["functions"]
    assert function["name"] == "text_bm25" and function["output_field_names"] == ["sparse"]
    client.flush(name)
    client.release_collection(name)
    client.load_collection(name)
    for query, hits in zip(QUERIES, search(client, name, QUERIES), strict=True):
        check(hits, bm25(query, corpus), 3)
    matched = client.query(
        name, filter="text_match(text, 'documents kafka')", consistency_level="Strong"
    )
    assert sorted(r["id"] for r in matched) == [0, 3, 5]
    filters = {  # sealed rows now, after the reload
        "PHRASE_MATCH(text, 'capture meaning')": [6],
        "PHRASE_MATCH(text, 'vectors meaning', 1)": [6],
        "PHRASE_MATCH(text, 'meaning capture', {slop})": [6],
        "TEXT_MATCH(text, 'documents query terms', minimum_should_match=2)": [0, 5],
    }
    for expr, keys in filters.items():
        found = client.query(
            name, filter=expr, filter_params={"slop": 2}, consistency_level="Strong"
        )
        assert sorted(r["id"] for r in found) == keys, expr
    with pytest.raises(MilvusException, match="slop must be in"):
        client.query(name, filter="PHRASE_MATCH(text, 'a b', -1)")
    client.delete(name, ids=[0, 5])
    left = {k: t for k, t in corpus.items() if k not in (0, 5)}
    [hits] = search(client, name, ["documents query"])
    check(hits, bm25("documents query", left), 3)
    with pytest.raises(MilvusException, match="not allowed to retrieve raw data"):
        client.query(name, filter="id > 0", output_fields=["sparse"])
    with pytest.raises(MilvusException):
        client.insert(name, [{"id": 99, "text": "x", "dense": [0.0, 0.0], "sparse": {1: 1.0}}])


def test_hybrid_search_fuses_bm25_with_a_dense_vector(client, name):
    create(client, name)
    client.insert(
        name, [{"id": i, "text": t, "dense": [float(i), 0.0]} for i, t in enumerate(TEXTS)]
    )
    text = AnnSearchRequest(["documents"], "sparse", {"metric_type": "BM25"}, limit=5)
    dense = AnnSearchRequest([[5.0, 0.0]], "dense", {"metric_type": "L2"}, limit=5)
    [hits] = client.hybrid_search(
        name,
        [text, dense],
        RRFRanker(),
        limit=3,
        output_fields=["text"],
        consistency_level="Strong",
    )
    ids = [h["id"] for h in hits]
    assert ids[0] == 5  # in both lists, first in one: the best fused rank
    assert len(ids) == 3


def test_rest_creates_inserts_and_searches_texts(standalone, client):
    base = f"http://127.0.0.1:{standalone.config.service.http_port}/v2/vectordb"
    name = f"fts_rest_{uuid.uuid4().hex[:6]}"

    def post(path: str, body: dict) -> dict:
        reply = requests.post(
            f"{base}/{path}", json={"collectionName": name, **body}, timeout=60
        ).json()
        assert reply["code"] == 0, reply
        return reply.get("data")

    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {
                "fieldName": "text",
                "dataType": "VarChar",
                "elementTypeParams": {"max_length": 1000, "enable_analyzer": True},
            },
            {"fieldName": "sparse", "dataType": "SparseFloatVector"},
        ],
        "functions": [
            {
                "name": "bm25",
                "type": "BM25",
                "inputFieldNames": ["text"],
                "outputFieldNames": ["sparse"],
            }
        ],
    }
    index = [
        {"fieldName": "sparse", "metricType": "BM25", "indexName": "s", "indexType": "AUTOINDEX"}
    ]
    post("collections/create", {"schema": schema, "indexParams": index})
    try:
        post("entities/insert", {"data": [{"id": i, "text": t} for i, t in enumerate(TEXTS)]})
        found = post(
            "entities/search",
            {
                "data": ["Kafka log"],
                "annsField": "sparse",
                "limit": 2,
                "outputFields": ["text"],
                "consistencyLevel": "Strong",
            },
        )
        expected = sorted(bm25("Kafka log", dict(enumerate(TEXTS))).items(), key=lambda kv: -kv[1])
        assert [h["id"] for h in found] == [k for k, _ in expected[:2]]
        assert found[0]["distance"] == pytest.approx(expected[0][1], rel=1e-4)
        described = post("collections/describe", {})
        assert described["functions"][0]["outputFieldNames"] == ["sparse"]
    finally:
        client.drop_collection(name)


def test_rankings_and_matches_equal_milvus_lites(pair):
    """The same collection, rows and searches in Vectide and in milvus-lite (the oracle):
    the same rows in the same order for BM25 searches, the same rows for text_match."""
    name = f"fts_pair_{uuid.uuid4().hex[:6]}"
    rows = [{"id": i, "text": t, "dense": [float(i), 0.0]} for i, t in enumerate(TEXTS)]
    queries = ["documents query", "vectors terms", "Kafka log", "the node", "query's terms"]
    found = []
    for client in pair:
        create(client, name)
        try:
            client.insert(name, rows)
            hits = search(client, name, queries, limit=4)
            matches = [
                sorted(
                    r["id"]
                    for r in client.query(
                        name, filter=f"text_match(text, '{w}')", consistency_level="Strong"
                    )
                )
                for w in ("documents", "the vectors", "query s")
            ]
            found.append(([[h["id"] for h in q] for q in hits], matches))
        finally:
            client.drop_collection(name)
    ours, lite = found
    assert ours == lite
