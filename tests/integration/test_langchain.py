"""LangChain's Milvus vector store (``langchain-milvus``, pinned in tests/clients/langchain,
unmodified, on the pymilvus 3 it requires) runs a retrieval app's flow against a Vectide
standalone: from_texts, similarity search with scores and metadata, metadata filters, the
retriever, add and delete documents, MMR (which reads vectors back).

The client lives in its own virtualenv (``.vectide/langchain/<hash of requirements.txt>``),
built once by the first run (about a minute), since the project itself pins pymilvus 2.6.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.clients.install import run_flow
from tests.infra import REPO

CLIENT = REPO / "tests" / "clients" / "langchain"
TEXTS = [tuple(pair) for pair in json.loads((CLIENT / "texts.json").read_text())]


@pytest.fixture(scope="module")
def observed(standalone) -> dict:
    return run_flow("langchain", standalone.uri, f"lc_{uuid.uuid4().hex[:8]}")


def test_similarity_search_finds_the_text_with_its_metadata_and_key(observed):
    text, topic = TEXTS[2]
    assert observed["best"]["text"] == text
    metadata = observed["best"]["metadata"]
    assert (metadata["topic"], metadata["n"]) == (topic, 2)
    assert isinstance(metadata["pk"], int)  # the primary key comes back as metadata
    scores = [score for _, score in observed["scored"]]
    assert observed["scored"][0][0] == text and scores == sorted(scores)  # L2: best first


def test_metadata_filters_and_the_retriever(observed):
    assert observed["filtered"] == sorted(t for t, topic in TEXTS if topic == "storage")
    assert observed["retrieved"][0] == TEXTS[4][0] and len(observed["retrieved"]) == 2


def test_added_documents_are_found_and_deleted(observed):
    assert observed["added"] == ["ui"]
    assert observed["deleted"] and observed["after_delete"] == 0


def test_max_marginal_relevance_reads_vectors_back(observed):
    assert observed["mmr"][0] == TEXTS[3][0] and len(set(observed["mmr"])) == 3


def test_bm25_full_text_and_hybrid_search(observed):
    """``BM25BuiltInFunction``: the text sharing the query's words ranks first alone, and
    the text both the dense and the BM25 search rank first wins the fusion."""
    assert observed["bm25"][0] == TEXTS[3][0]  # "The data node persists segments to S3"
    assert observed["hybrid"] == [TEXTS[1][0]]
