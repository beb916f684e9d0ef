"""Text analysis for full-text search: a VarChar field's text becomes terms, and the terms
become a sparse vector, as Milvus's BM25 function makes them.

Milvus runs a tantivy analyzer over the field named as a BM25 function's input
(``enable_analyzer=True``, ``analyzer_params``) and hashes each term to a sparse index whose
value is the term's count in the text; a query's text is analyzed the same way. The proxy
does both here (inserts, Kafka ingest and searches all pass through it), so every role
agrees on the terms: a collection's analyzer is fixed when it is created.

What is offered is Milvus's ``standard`` analyzer (runs of letters, digits and underscores,
lowercased: milvus-lite splits ``don't`` and ``3.14`` in two, so does this), its
``english`` analyzer (plus English stop words and the Snowball stemmer, which tantivy's
stemmer also is), and custom chains of the ``standard`` or ``whitespace`` tokenizer with the
filters ``lowercase``, ``asciifolding``, ``alphanumonly``, ``stop``, ``length`` and
``stemmer``. Anything else (``chinese``/jieba, ``icu``, regex tokenizers, ...) is refused
at create, naming what is offered, instead of being analyzed differently than asked.
"""

from __future__ import annotations

import json
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import snowballstemmer

from vectide.services.common import vector_types

#: Lucene's English stop words, the list Milvus's ``_english_`` and ``english`` analyzer use
ENGLISH_STOP_WORDS = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into"),
        *("is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then"),
        *("there", "these", "they", "this", "to", "was", "will", "with"),
    }
)
#: a word of the standard tokenizer: a run of letters, digits and underscores; apostrophes,
#: dots and dashes split (``don't`` is ``don`` and ``t``, as Milvus's tokenizer has it)
_WORDS = re.compile(r"\w+", re.UNICODE)
_NON_SPACE = re.compile(r"\S+")
_ALPHANUMERIC = re.compile(r"^[A-Za-z0-9]+$")
_TOKENIZERS = ("standard", "whitespace")
_FILTERS = ("lowercase", "asciifolding", "alphanumonly", "stop", "length", "stemmer")
_TYPES = ("standard", "english")
#: the largest sparse index is 2^32 - 2 (2^32 - 1 is reserved, as in Milvus)
_INDEX_SPACE = 0xFFFFFFFF

Filter = Callable[[list[str]], list[str]]


class AnalyzerError(ValueError):
    """``analyzer_params`` Vectide cannot honour; the message names what it offers."""


@dataclass(frozen=True)
class Token:
    """A term where the text had it (RunAnalyzer's details): UTF-8 byte offsets, and its
    word's position among the tokenizer's words (a dropped stop word keeps its position)."""

    term: str
    start: int
    end: int
    position: int


@dataclass(frozen=True)
class Analyzer:
    """A tokenizer and its filters, applied in order."""

    tokenizer: str
    filters: tuple[Filter, ...]

    def terms(self, text: str) -> list[str]:
        tokens = _WORDS.findall(text) if self.tokenizer == "standard" else text.split()
        for step in self.filters:
            tokens = step(tokens)
        return tokens

    def tokens(self, text: str) -> list[Token]:
        """The terms with their places: each word through the filters alone (every filter
        keeps, changes or drops one token at a time)."""
        out = []
        for match, term, position in self._placed(text):
            start = len(text[: match.start()].encode())
            out.append(Token(term, start, start + len(match.group().encode()), position))
        return out

    def placed_terms(self, text: str | None) -> list[tuple[str, int]]:
        """The terms with their word positions (a dropped stop word leaves its position
        empty, as tantivy's filters do): what a phrase is matched against."""
        return [(term, position) for _, term, position in self._placed(text or "")]

    def _placed(self, text: str) -> Iterator[tuple[re.Match[str], str, int]]:
        words = _WORDS if self.tokenizer == "standard" else _NON_SPACE
        for position, match in enumerate(words.finditer(text)):
            kept = [match.group()]
            for step in self.filters:
                kept = step(kept)
            if kept:
                yield match, kept[0], position

    def sparse_row(self, text: str | None) -> bytes:
        """The text's terms as a sparse row: each term's index, its count as the value (a
        null or an empty text is an empty row, which no search matches)."""
        if not text:
            return b""
        counts = Counter(term_index(t) for t in self.terms(text))
        return vector_types.sparse_row(counts)


def term_index(term: str) -> int:
    """A term's sparse index: a 32-bit hash of its UTF-8 bytes, stable across processes and
    versions (Python's ``hash`` is salted per process)."""
    return zlib.crc32(term.encode()) % _INDEX_SPACE


def analyzer_of(params: Mapping[str, Any] | str | None) -> Analyzer:
    """The analyzer ``analyzer_params`` describe (a dict, its JSON, or nothing: standard).
    AnalyzerError for anything Vectide does not offer."""
    return _cached(json.dumps(_as_dict(params), sort_keys=True))


@lru_cache(maxsize=64)
def _cached(canonical: str) -> Analyzer:
    params = json.loads(canonical)
    kind = params.pop("type", None)
    if kind is not None:
        return _built_in(str(kind), params)
    tokenizer = params.pop("tokenizer", "standard")
    if isinstance(tokenizer, dict):
        tokenizer = tokenizer.get("type")
    if tokenizer not in _TOKENIZERS:
        offered = ", ".join(_TOKENIZERS)
        raise AnalyzerError(f"tokenizer {tokenizer!r} is not supported by Vectide ({offered})")
    filters = params.pop("filter", [])
    if not isinstance(filters, list):
        raise AnalyzerError("analyzer_params.filter must be a list")
    _no_more(params, "analyzer_params")
    return Analyzer(tokenizer, tuple(_filter(f) for f in filters))


def _as_dict(params: Mapping[str, Any] | str | None) -> dict[str, Any]:
    if params is None or params == "":
        return {"type": "standard"}
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            raise AnalyzerError(f"analyzer_params is not valid JSON: {params[:60]!r}") from None
    if not isinstance(params, Mapping):
        raise AnalyzerError("analyzer_params must be an object")
    return dict(params)


def _built_in(kind: str, params: dict[str, Any]) -> Analyzer:
    """Milvus's ``standard`` (words, lowercased) and ``english`` (plus English stop words
    and the Snowball stemmer) analyzers; both take ``stop_words``."""
    if kind not in _TYPES:
        raise AnalyzerError(
            f"analyzer type {kind!r} is not supported by Vectide (offered: {', '.join(_TYPES)}, "
            f"or a tokenizer ({', '.join(_TOKENIZERS)}) with filters ({', '.join(_FILTERS)}))"
        )
    extra = _stop_words(params.pop("stop_words", []))
    _no_more(params, f"the {kind} analyzer")
    steps: list[Filter] = [_lowercase]
    if kind == "english":
        steps += [_stop(ENGLISH_STOP_WORDS | extra), _stemmer("english")]
    elif extra:
        steps.append(_stop(extra))
    return Analyzer("standard", tuple(steps))


def _filter(spec: Any) -> Filter:
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict) or "type" not in spec:
        raise AnalyzerError(f"an analyzer filter must be a name or an object with a type: {spec!r}")
    spec = dict(spec)
    kind = spec.pop("type")
    if kind == "lowercase":
        step = _lowercase
    elif kind == "asciifolding":
        step = _ascii_folding
    elif kind == "alphanumonly":
        step = _alphanumeric_only
    elif kind == "stop":
        step = _stop(_stop_words(spec.pop("stop_words", [])))
    elif kind == "length":
        step = _length(spec.pop("max", None))
    elif kind == "stemmer":
        step = _stemmer(spec.pop("language", "english"))
    else:
        raise AnalyzerError(
            f"analyzer filter {kind!r} is not supported by Vectide (offered: {', '.join(_FILTERS)})"
        )
    _no_more(spec, f"filter {kind}")
    return step


def _no_more(params: dict[str, Any], what: str) -> None:
    if params:
        raise AnalyzerError(f"{what} does not take {', '.join(sorted(params))}")


def _stop_words(words: Any) -> frozenset[str]:
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise AnalyzerError("stop_words must be a list of strings")
    out: set[str] = set()
    for word in words:
        out |= ENGLISH_STOP_WORDS if word == "_english_" else {word}
    return frozenset(out)


def _lowercase(tokens: list[str]) -> list[str]:
    return [t.lower() for t in tokens]


def _ascii_folding(tokens: list[str]) -> list[str]:
    return [_fold(t) for t in tokens]


def _fold(token: str) -> str:
    if token.isascii():
        return token
    decomposed = unicodedata.normalize("NFKD", token)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _alphanumeric_only(tokens: list[str]) -> list[str]:
    return [t for t in tokens if _ALPHANUMERIC.match(t)]


def _stop(words: frozenset[str]) -> Filter:
    return lambda tokens: [t for t in tokens if t not in words]


def _length(limit: Any) -> Filter:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise AnalyzerError(f"filter length needs max, a positive integer, got {limit!r}")
    return lambda tokens: [t for t in tokens if len(t) <= limit]


def _stemmer(language: Any) -> Filter:
    try:
        stemmer = snowballstemmer.stemmer(str(language).lower())
    except KeyError:
        raise AnalyzerError(f"stemmer language {language!r} is not supported") from None
    return stemmer.stemWords
