"""A LangChain retrieval flow against a Milvus-API server, unmodified: run by
tests/integration/test_langchain.py with the pinned langchain-milvus in its own virtualenv.

Usage: flow.py URI COLLECTION; prints what it observed as one JSON object."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_milvus import BM25BuiltInFunction, Milvus

#: (text, topic) pairs, shared with the test that checks what this prints
TEXTS = [tuple(pair) for pair in json.loads((Path(__file__).parent / "texts.json").read_text())]


def main(uri: str, collection: str) -> dict:
    store = Milvus.from_texts(
        [t for t, _ in TEXTS],
        DeterministicFakeEmbedding(size=32),  # a text's own embedding finds it first
        metadatas=[{"topic": topic, "n": i} for i, (_, topic) in enumerate(TEXTS)],
        collection_name=collection,
        connection_args={"uri": uri},
        consistency_level="Strong",
        drop_old=True,
    )
    seen: dict = {}
    [best] = store.similarity_search(TEXTS[2][0], k=1)
    seen["best"] = {"text": best.page_content, "metadata": best.metadata}
    scored = store.similarity_search_with_score(TEXTS[2][0], k=3)
    seen["scored"] = [[d.page_content, s] for d, s in scored]
    storage = store.similarity_search(TEXTS[0][0], k=6, expr='topic == "storage"')
    seen["filtered"] = sorted(d.page_content for d in storage)
    seen["retrieved"] = [
        d.page_content for d in store.as_retriever(search_kwargs={"k": 2}).invoke(TEXTS[4][0])
    ]
    ids = store.add_documents(
        [Document("Attu is a web console", metadata={"topic": "ui", "n": 10})]
    )
    seen["added"] = [
        d.metadata["topic"] for d in store.similarity_search("Attu is a web console", k=1)
    ]
    seen["deleted"] = bool(store.delete(ids=ids))
    seen["after_delete"] = len(store.similarity_search("anything", k=10, expr='topic == "ui"'))
    mmr = store.max_marginal_relevance_search(TEXTS[3][0], k=3, fetch_k=6)
    seen["mmr"] = [d.page_content for d in mmr]
    store.client.drop_collection(collection)
    seen.update(full_text(uri, collection))
    return seen


def full_text(uri: str, collection: str) -> dict:
    """LangChain's BM25 built-in function: full-text search alone, and hybrid with a dense
    vector (RRF), as its docs show them."""
    texts = [t for t, _ in TEXTS]
    common = {"connection_args": {"uri": uri}, "consistency_level": "Strong", "drop_old": True}
    seen: dict = {}
    fts = Milvus.from_texts(
        texts,
        None,
        builtin_function=BM25BuiltInFunction(),
        vector_field="sparse",
        collection_name=f"{collection}_fts",
        **common,
    )
    seen["bm25"] = [
        d.page_content for d in fts.similarity_search("which node persists segments", k=2)
    ]
    fts.client.drop_collection(f"{collection}_fts")
    hybrid = Milvus.from_texts(
        texts,
        DeterministicFakeEmbedding(size=32),
        builtin_function=BM25BuiltInFunction(),
        vector_field=["dense", "sparse"],
        collection_name=f"{collection}_hybrid",
        **common,
    )
    found = hybrid.similarity_search(TEXTS[1][0], k=1, ranker_type="rrf")
    seen["hybrid"] = [d.page_content for d in found]
    hybrid.client.drop_collection(f"{collection}_hybrid")
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
