"""Whether a text holds a phrase (``PHRASE_MATCH``): the phrase's terms in order and
adjacent, or, with a slop, within that many position moves of it.

Milvus evaluates phrases with tantivy. A term's *aligned* place is its position in the text
minus its offset in the phrase, so an exact phrase puts every term at the same aligned place.
The slop is a budget spent on the distance between consecutive terms' aligned places: an
extra word between two terms costs 1, two terms swapped cost 2 (``learning machine`` is
``machine learning`` at slop 2), as in tantivy and Lucene. Each term may use any of its
places in the text, the cheapest combination counts.

For a phrase of two terms, or any phrase at slop 0, this is exactly what tantivy answers
(tests/unit/test_phrase_match.py checks it against tantivy). For three terms or more with a
slop, tantivy's greedy walk visits the terms in the order of their document frequencies and
checks the last one against the slop alone, so its answer for a few texts depends on the
rest of the segment; this module keeps to the budget as Milvus documents it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def text_holds_phrase(
    text: Iterable[tuple[str, int]], phrase: Sequence[tuple[str, int]], slop: int
) -> bool:
    """Whether a text's (term, position) pairs hold a phrase's (both from the field's
    analyzer: ``Analyzer.placed_terms``) within ``slop``."""
    if not phrase:
        return False
    places: dict[str, list[int]] = {}
    for term, position in text:
        places.setdefault(term, []).append(position)
    start = phrase[0][1]
    offsets = [position - start for _, position in phrase]
    return holds_phrase([places.get(term, []) for term, _ in phrase], offsets, slop)


def holds_phrase(places: Sequence[Sequence[int]], offsets: Sequence[int], slop: int) -> bool:
    """``places[k]``: the positions of the phrase's k-th term in the text (empty: absent);
    ``offsets[k]``: its position in the phrase. True when some choice of one position per term
    costs at most ``slop`` (the sum of the distances between consecutive aligned places)."""
    if not places or any(not p for p in places):
        return False
    # cheapest cost of a chain ending at each aligned place of the term so far
    costs = {p - offsets[0]: 0 for p in places[0]}
    for term_places, offset in zip(places[1:], offsets[1:], strict=True):
        reached: dict[int, int] = {}
        for aligned in {p - offset for p in term_places}:
            cost = min(c + abs(aligned - before) for before, c in costs.items())
            if cost <= slop:
                reached[aligned] = cost
        if not reached:
            return False
        costs = reached
    return True
