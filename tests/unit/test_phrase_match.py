"""PHRASE_MATCH's slop semantics (services/common/phrase.py), checked by hand against the
cases Milvus documents and, like Milvus's own tests, against tantivy on generated texts."""

from __future__ import annotations

import random

import pytest
import tantivy

from vectide.services.common import analyzer
from vectide.services.common.expr.parser import ExprError, PhraseMatch, TextMatch, parse
from vectide.services.common.phrase import text_holds_phrase

STANDARD = analyzer.analyzer_of(None)
VOCABULARY = ["machine", "learning", "deep", "robotics", "model", "data"]


def holds(text: str, phrase: str, slop: int) -> bool:
    return text_holds_phrase(STANDARD.placed_terms(text), STANDARD.placed_terms(phrase), slop)


@pytest.mark.parametrize(
    ("text", "slop"),
    [
        ("machine learning boosts efficiency", 0),
        ("machine deep learning", 1),  # one word between costs 1
        ("learning machine", 2),  # swapped costs 2
        ("learning deep machine", 3),  # swapped and one word between
        ("Machine, learning!", 0),  # analyzed: case and punctuation do not count
    ],
)
def test_a_phrase_holds_from_its_cost_on(text: str, slop: int) -> None:
    assert holds(text, "machine learning", slop)
    if slop:
        assert not holds(text, "machine learning", slop - 1)


def test_longer_phrases_spend_one_budget_and_every_term_must_be_there() -> None:
    assert holds("robotics machine learning", "robotics machine learning", 0)
    assert holds("robotics x machine y learning", "robotics machine learning", 2)
    assert not holds("robotics x machine y learning", "robotics machine learning", 1)
    assert not holds("robotics machine", "robotics machine learning", 5)
    # the cheapest of a term's places counts
    assert holds("machine a b c learning machine learning", "machine learning", 0)
    assert not holds("", "machine learning", 3)


def test_stop_words_keep_their_places_in_text_and_phrase() -> None:
    english = analyzer.analyzer_of({"type": "english"})
    assert english.placed_terms("the cat and the hat") == [("cat", 1), ("hat", 4)]
    assert english.placed_terms(None) == []


def _tantivy_matches(texts: list[str], phrase: list[str], slop: int) -> set[int]:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False)
    builder.add_unsigned_field("row", stored=True)
    schema = builder.build()
    index = tantivy.Index(schema, path=None)
    writer = index.writer()
    for row, text in enumerate(texts):
        writer.add_document(tantivy.Document(text=text, row=row))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    query = tantivy.Query.phrase_query(schema, "text", phrase, slop)
    hits = searcher.search(query, limit=len(texts)).hits
    return {searcher.doc(address)["row"][0] for _, address in hits}


@pytest.mark.parametrize("seed", range(4))
def test_two_term_phrases_and_exact_phrases_match_what_tantivy_matches(seed: int) -> None:
    """Milvus evaluates PHRASE_MATCH with tantivy; its tests compare with tantivy-py as
    these do. Two-term phrases at any slop and longer phrases at slop 0 must agree row for
    row (longer phrases with a slop are documented to differ: see phrase.py)."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 8))) for _ in range(300)]
    queries = [(rng.sample(VOCABULARY, 2), rng.randint(0, 4)) for _ in range(12)]
    queries += [([rng.choice(VOCABULARY)] * 2, rng.randint(0, 2)) for _ in range(3)]
    queries += [(rng.sample(VOCABULARY, rng.randint(3, 4)), 0) for _ in range(6)]
    for words, slop in queries:
        ours = {row for row, text in enumerate(texts) if holds(text, " ".join(words), slop)}
        assert ours == _tantivy_matches(texts, words, slop), (words, slop)


def test_the_filter_syntax_takes_a_slop_and_a_minimum_as_milvus_does() -> None:
    assert parse("phrase_match(text, 'a b')") == PhraseMatch(
        parse("text"), "a b", 0, text="phrase_match(text, 'a b')"
    )
    assert parse("PHRASE_MATCH(text, 'a b', {s})", {"s": 3}).slop == 3
    assert parse("TEXT_MATCH(text, 'a b c', minimum_should_match=2)").minimum == 2
    assert parse("text_match(text, 'a b')") == TextMatch(
        parse("text"), "a b", 1, text="text_match(text, 'a b')"
    )
    refused = {
        "phrase_match(text, 'a b', -1)": r"slop must be in \[0, 4294967295\], got -1",
        "phrase_match(text, 'a b', 2**40)": "expected",
        "phrase_match(text, 'a b', 4294967296)": "slop must be in",
        "phrase_match(text, 'a b', 1.5)": "slop must be a constant integer",
        "phrase_match(text, 'a b', 'x')": "slop must be a constant integer",
        "phrase_match(text, 3)": "phrase_match needs a string",
        "text_match(text, 'a', minimum_should_match=0)": r"must be in \[1, 1000\], got 0",
        "text_match(text, 'a', minimum_should_match=1001)": r"must be in \[1, 1000\]",
        "text_match(text, 'a', minimum=2)": "takes minimum_should_match=<n>, not 'minimum'",
        "text_match(text, 'a', minimum_should_match 2)": "expected '='",
        "a = 1": r"unexpected '=' \(did you mean '=='\?\)",
    }
    for expr, message in refused.items():
        with pytest.raises(ExprError, match=message):
            parse(expr)
