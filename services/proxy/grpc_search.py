"""The search RPCs: Search (plain, range, grouping, iterator pages) and HybridSearch, and
RunAnalyzer (the terms full-text search makes of a text).

A mixin of :class:`services.proxy.grpc_service.MilvusService`, which supplies ``proxy``,
``_charge`` and ``_read_common``. A hybrid search's sub-requests are read exactly as Search
requests are; the request's own consistency, partitions and output fields apply to all.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np
from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from vectide.services.common import analyzer, errors, vector_types
from vectide.services.common.aggregation import GROUP_BY_PARAM, group_fields
from vectide.services.common.errors import MilvusError
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.results import SearchHits
from vectide.services.common.schema import CollectionInfo, FieldSchema
from vectide.services.proxy import convert, decay, functions, limits
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.dql import Outputs, QuerySpec, SearchSpec, resolve_outputs
from vectide.services.proxy.expr_params import template_values
from vectide.services.proxy.grpc_common import ok, ref_of, rpc
from vectide.services.proxy.hybrid import HybridSpec, hybrid_search
from vectide.services.proxy.rerank import DECAY, Cut, Ranker, ranker_of
from vectide.services.proxy.search_iterator import (
    IteratorPage,
    iterator_page,
    mark_page,
    page_params,
)


class SearchRpcs:
    proxy: Proxy

    if TYPE_CHECKING:  # supplied by MilvusService

        def _charge(self, kind: str, amount: float) -> None: ...

        def _read_common(
            self, request: Any, expr: str, context: grpc.ServicerContext
        ) -> dict[str, Any]: ...

    @rpc(milvus_pb2.SearchResults)
    def Search(self, request, context):
        if request.sub_reqs:
            raise MilvusError(
                errors.Code.UNIMPLEMENTED,
                "search with sub-requests is not supported yet (use HybridSearch)",
            )
        spec, page = self._search_spec(request, self._read_common(request, request.dsl, context))
        self._charge(limits.SEARCH, len(spec.vectors))
        ranker = self._decay_of(request, spec.collection_name)
        if ranker is not None:
            if page is not None:
                raise errors.invalid("a search iterator cannot take a rerank function")
            if spec.order_by:
                raise errors.invalid("order_by and function_score cannot be used together")
            return self._decayed(spec, ranker)
        info, hits, outputs = self.proxy.search(spec)
        reply = convert.search_results(info, hits, outputs, spec.limit, spec.group_by_field)
        if page is not None:
            mark_page(reply, page, hits)
        return reply

    def _decay_of(self, request: Any, collection_name: str) -> decay.Decay | None:
        """The decay ranker of a request's ``function_score``, checked; None without one."""
        if not (request.HasField("function_score") and request.function_score.functions):
            return None
        info = self.proxy.meta.get(collection_name)
        return decay.decay_of(request.function_score, info.schema)

    def _decayed(self, spec: SearchSpec, ranker: decay.Decay) -> milvus_pb2.SearchResults:
        """A search reranked by a decay function (``decay.py``): more candidates, each
        query's reordered and cut, the ranker's field read and dropped unless asked for."""
        if spec.group_by_field:
            raise errors.invalid("a decay ranker cannot be used with grouping search")
        inner = replace(
            spec,
            limit=decay.candidates(spec.limit, spec.offset),
            offset=0,
            round_decimal=-1,
            output_fields=[*spec.output_fields, ranker.field],
        )
        info, hits, outputs = self.proxy.search(inner)
        hits = decay.rerank(hits, ranker, spec.limit, spec.offset)
        if spec.round_decimal >= 0:
            hits.scores = np.round(hits.scores, spec.round_decimal)
        hits, outputs = _without_ranker_field(info, hits, outputs, ranker.field, spec.output_fields)
        return convert.search_results(info, hits, outputs, spec.limit, "")

    @rpc(milvus_pb2.SearchResults)
    def HybridSearch(self, request, context):
        common = self._read_common(request, "", context)
        if common["order_by"]:
            raise errors.invalid("order_by_fields is not supported in a hybrid search by Vectide")
        decayed = self._decay_of(request, common["collection_name"])
        wanted = common["output_fields"]
        if decayed is not None:  # the sub-searches read the ranker's field too
            common = {**common, "output_fields": [*wanted, decayed.field]}
        searches = []
        for sub in request.requests:
            own = {"expr": sub.dsl, "expr_params": template_values(sub.expr_template_values)}
            spec, _ = self._search_spec(sub, {**common, **own})
            # a sub-search returns its own best ``limit``: offset and rounding apply to the fusion
            searches.append(replace(spec, offset=0, round_decimal=-1))
        rank = {kv.key: _loads(kv.value) for kv in request.rank_params}
        group_by = _group_field(rank)
        cut = Cut(
            limit=convert.int_param(rank.get("limit", 10), "limit"),
            offset=convert.int_param(rank.get("offset") or 0, "offset"),
            round_decimal=convert.int_param(rank.get("round_decimal", -1), "round_decimal"),
            group_size=_group_size(rank.get("group_size")) if group_by else 0,
            strict_group_size=str(rank.get("strict_group_size")).lower() == "true",
            group_scorer=str(rank.get("rank_group_scorer") or "max"),
        )
        params = rank.get("params")
        if decayed is not None:
            if group_by:
                raise errors.invalid("a decay ranker cannot be used with grouping search")
            ranker = Ranker(DECAY, decay=decayed)
        else:
            ranker = ranker_of(
                str(rank.get("strategy") or "rrf"),
                params if isinstance(params, dict) else {},
                len(searches),
            )
        self._charge(limits.SEARCH, sum(len(s.vectors) for s in searches))
        spec = HybridSpec(searches, ranker, cut, group_by)
        info, hits, outputs = hybrid_search(self.proxy, spec)
        if decayed is not None:
            hits, outputs = _without_ranker_field(info, hits, outputs, decayed.field, wanted)
        return convert.search_results(info, hits, outputs, cut.limit, group_by)

    @rpc(milvus_pb2.RunAnalyzerResponse)
    def RunAnalyzer(self, request, context):
        """The terms an analyzer makes of texts (pymilvus ``run_analyzer``): the analyzer of
        ``analyzer_params``, or of a collection's field."""
        if request.analyzer_names:
            raise errors.invalid("multi-language analyzers (analyzer_names) are not supported")
        if request.collection_name:
            info = self.proxy.meta.get(ref_of(request, context))
            analyze = functions.analyzer_for(info.schema, request.field_name)
        else:
            try:
                analyze = analyzer.analyzer_of(request.analyzer_params or None)
            except (analyzer.AnalyzerError, ValueError) as exc:
                raise errors.invalid(str(exc)) from None
        results = []
        for raw in request.placeholder:
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                raise errors.invalid("a text to analyze is not UTF-8") from None
            results.append(
                milvus_pb2.AnalyzerResult(
                    tokens=[
                        _token(t, request.with_detail, request.with_hash)
                        for t in analyze.tokens(text)
                    ]
                )
            )
        return milvus_pb2.RunAnalyzerResponse(status=ok(), results=results)

    def _vectors_of(
        self, ids: schema_pb2.IDs, field: FieldSchema, info: CollectionInfo, common: dict
    ) -> np.ndarray | list[bytes]:
        """Search by primary keys (pymilvus ``search(ids=...)``): the stored vectors of these
        rows, read at the search's own consistency, are the queries, in the order given."""
        keys = _pk_values(ids)
        if not keys:
            raise errors.invalid("search by primary keys needs at least one key")
        if field.is_function_output:
            raise errors.invalid(
                f"search by primary keys cannot read {field.name}: a function computes it"
            )
        pk = info.schema.primary.name
        where = {"expr": f"{pk} in {{keys}}", "expr_params": {"keys": keys}}
        rows = self.proxy.query(QuerySpec(**{**common, **where, "output_fields": [field.name]}))[1]
        stored = rows.pks.tolist() if isinstance(rows.pks, np.ndarray) else rows.pks
        found = {k: i for i, k in enumerate(stored)}
        missing = [k for k in keys if k not in found]
        if missing:
            raise errors.invalid(f"primary keys not found in {info.name}: {missing[:10]}")
        values, order = rows.fields[field.name], [found[k] for k in keys]
        null = [k for k in keys if values[found[k]] is None]
        if null:
            raise errors.invalid(f"primary keys without a vector in {field.name}: {null[:10]}")
        if field.data_type == DataType.SPARSE_FLOAT_VECTOR:
            return [values[i] for i in order]
        vectors = np.asarray(values)[order]
        if field.data_type in vector_types.FLOAT_TYPES:
            return vector_types.as_float32(field.data_type, vectors)
        return vectors

    def _search_spec(
        self, request: Any, common: dict[str, Any]
    ) -> tuple[SearchSpec, IteratorPage | None]:
        """A Search request (or a hybrid search's sub-request) as a :class:`SearchSpec`, and
        the iterator page it asks for, if any."""
        decoded = _decoded_params(tuple([(kv.key, kv.value) for kv in request.search_params]))
        params = decoded.params
        info = self.proxy.meta.get(common["collection_name"])
        anns_field = decoded.anns_field
        field = info.schema.field(anns_field) if anns_field else None
        if field is None:
            vectors = info.schema.vector_fields
            field = vectors[0] if len(vectors) == 1 else None
        if field is None:
            raise errors.invalid("anns_field is required")
        if not field.is_vector:  # before its vectors are read as the field's type
            raise errors.invalid(f"anns_field {field.name} is not a vector field")
        group_by = decoded.group_by
        spec = SearchSpec(
            vectors=(
                self._vectors_of(request.ids, field, info, common)
                if request.HasField("ids")
                else convert.read_vectors(request.placeholder_group, field, info.schema)
            ),
            anns_field=field.name,
            metric_type=decoded.metric_type,
            limit=decoded.limit,
            offset=decoded.offset,
            round_decimal=decoded.round_decimal,
            params=decoded.search_params,
            group_by_field=group_by,
            group_size=decoded.group_size,
            **common,
        )
        page = iterator_page(params)
        if page is not None:
            if group_by:
                raise errors.invalid("Not allowed to do groupBy when doing iteration")
            spec.params = page_params(page, spec.params)
        return spec, page


def _token(token: analyzer.Token, detail: bool, hashed: bool) -> milvus_pb2.AnalyzerToken:
    out = milvus_pb2.AnalyzerToken(token=token.term)
    if detail:
        out.start_offset, out.end_offset = token.start, token.end
        out.position, out.position_length = token.position, 1
    if hashed:  # the sparse index the term has in a BM25 function's output
        out.hash = analyzer.term_index(token.term)
    return out


def _without_ranker_field(
    info: CollectionInfo, hits: SearchHits, outputs: Outputs, name: str, wanted: list[str]
) -> tuple[SearchHits, Outputs]:
    """The reply's outputs as the client asked for them: a decay ranker's field was read
    for the ranking only, unless the client named it (or ``*``)."""
    shown = resolve_outputs(info.schema, wanted)
    if name in shown.fetch:
        return hits, outputs
    hits.fields.pop(name, None)
    return hits, replace(outputs, fetch=shown.fetch, names=shown.names)


def _pk_values(ids: schema_pb2.IDs) -> list[Any]:
    return list(ids.int_id.data) if ids.HasField("int_id") else list(ids.str_id.data)


def _group_size(value: Any) -> int:
    """``group_size`` as Milvus reads it: missing means 1."""
    if value in (None, ""):
        return 1
    return convert.int_param(value, "group_size")


@dataclass(frozen=True)
class _Decoded:
    """A request's ``search_params`` decoded, and what a search reads of them: kept per
    distinct set (``_decoded_params``), so read them, never change them."""

    params: dict[str, Any]
    anns_field: str
    metric_type: str
    limit: int
    offset: int
    round_decimal: int
    #: the index's own parameters (``params``' ``params``)
    search_params: dict[str, Any]
    group_by: str
    group_size: int


def _group_field(params: dict[str, Any]) -> str:
    """The field a grouping search groups by: ``group_by_field``, or pymilvus 3's
    ``group_by_fields`` naming one field (Milvus 3.0 groups a search by several)."""
    group_by = str(params.get("group_by_field") or "")
    several = group_fields(str(params.get(GROUP_BY_PARAM) or ""))
    if len(several) > 1 or (several and group_by not in ("", several[0])):
        raise errors.invalid(
            "grouping a search by several fields (group_by_fields) is not supported by "
            "Vectide: group it by one field"
        )
    return several[0] if several else group_by


@functools.lru_cache(maxsize=256)
def _decoded_params(pairs: tuple[tuple[str, str], ...]) -> _Decoded:
    """``pairs`` decoded and checked once per distinct set (a client's searches differ in
    their vectors); a set that fails a check raises every time (nothing is kept then)."""
    params = _search_params(pairs)
    group_by = _group_field(params)
    inner = params.get("params")
    return _Decoded(
        params=params,
        anns_field=str(params.get("anns_field") or ""),
        metric_type=str(params.get("metric_type") or ""),
        limit=convert.int_param(params.get("topk", 10), "topk"),
        offset=convert.int_param(params.get("offset") or 0, "offset"),
        round_decimal=convert.int_param(params.get("round_decimal", -1), "round_decimal"),
        search_params=inner if isinstance(inner, dict) else {},
        group_by=group_by,
        group_size=_group_size(params.get("group_size")) if group_by else 1,
    )


def _search_params(pairs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """A request's ``search_params`` decoded, each value JSON where it parses (kept with
    the rest of the set by ``_decoded_params``: read it, never change it)."""
    return {key: _loads(value) for key, value in pairs}


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
