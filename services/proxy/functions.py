"""Schema functions (Milvus 2.5): BM25, the one Vectide runs.

A BM25 function names an analyzed VarChar field (``enable_analyzer=True``) as its input and
a SparseFloatVector field as its output. Clients never send the output: the proxy computes it
at insert and upsert from the input's text (``run``), so Kafka ingest and REST get it too,
and a search of the output field takes query *texts*, analyzed the same way (``queries``).
The query nodes then score rows by BM25 (``services/querynode/bm25.py``).
"""

from __future__ import annotations

import json
from typing import Any

from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common import analyzer, errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.expr.parser import Expr, PhraseMatch, TextMatch
from vectide.services.common.msgstream.message import DataType, FieldColumn
from vectide.services.common.schema import (
    ANALYZER_PARAMS,
    ENABLE_ANALYZER,
    ENABLE_MATCH,
    CollectionSchema,
    FieldSchema,
    FunctionSchema,
)

BM25 = "BM25"
_TYPES = frozenset(v for _, v in schema_pb2.FunctionType.items())
#: the type params a VarChar field keeps for text analysis
TEXT_PARAMS = (ENABLE_ANALYZER, ANALYZER_PARAMS, ENABLE_MATCH)


def _illegal(message: str) -> MilvusError:
    return MilvusError(Code.COLLECTION_ILLEGAL_SCHEMA, message)


# -- schema ---------------------------------------------------------------------------------


def from_proto(proto: schema_pb2.FunctionSchema) -> FunctionSchema:
    kind = schema_pb2.FunctionType.Name(proto.type) if proto.type in _TYPES else str(proto.type)
    if kind != BM25:
        raise _illegal(
            f"function {proto.name}: {kind} functions are not supported by Vectide (BM25 is)"
        )
    return FunctionSchema(
        name=proto.name,
        function_type=kind,
        input_fields=list(proto.input_field_names),
        output_fields=list(proto.output_field_names),
        params={kv.key: kv.value for kv in proto.params},
        description=proto.description,
    )


def refuse_change(proto: schema_pb2.FunctionSchema, doing: str) -> MilvusError:
    """Why a function cannot be added to or altered in an existing collection (Milvus 2.6's
    AddCollectionFunction, AlterCollectionFunction): Milvus takes only embedding functions
    there, not BM25 (the rows written before would have no output), and BM25 is the one kind
    Vectide runs."""
    if not proto.name:
        return errors.invalid("function schema is empty")
    from_proto(proto)  # raises for every kind but BM25
    return errors.invalid(
        f"{doing} a BM25 function of an existing collection is not supported (as in Milvus): "
        "declare it when creating the collection"
    )


def to_proto(fn: FunctionSchema, schema: CollectionSchema) -> schema_pb2.FunctionSchema:
    def ids(names: list[str]) -> list[int]:
        return [f.field_id for n in names if (f := schema.field(n)) is not None]

    return schema_pb2.FunctionSchema(
        name=fn.name,
        description=fn.description,
        type=schema_pb2.FunctionType.Value(fn.function_type),
        input_field_names=fn.input_fields,
        input_field_ids=ids(fn.input_fields),
        output_field_names=fn.output_fields,
        output_field_ids=ids(fn.output_fields),
        params=[common_pb2.KeyValuePair(key=k, value=v) for k, v in fn.params.items()],
    )


def text_params(name: str, data_type: DataType, params: dict[str, str]) -> dict[str, str]:
    """A field's text-analysis type params, checked: VarChar only, and an analyzer Vectide
    offers (refused at create, not at the first insert)."""
    if "multi_analyzer_params" in params:
        raise _illegal(f"field {name}: multi-language analyzers are not supported by Vectide")
    kept = {k: str(params[k]) for k in TEXT_PARAMS if k in params}
    if not kept:
        return {}
    if data_type != DataType.VARCHAR:
        raise _illegal(f"field {name}: {', '.join(kept)} applies to VarChar fields only")
    for key in (ENABLE_ANALYZER, ENABLE_MATCH):
        if key in kept:
            kept[key] = kept[key].lower()
            if kept[key] not in ("true", "false"):
                raise _illegal(f"field {name}: {key} must be true or false, got {params[key]!r}")
    try:
        analyzer.analyzer_of(kept.get(ANALYZER_PARAMS))
    except analyzer.AnalyzerError as exc:
        raise _illegal(f"field {name}: {exc}") from None
    return kept


def validate(schema: CollectionSchema) -> None:
    """Milvus's rules for BM25 functions: one analyzed VarChar input, one SparseFloatVector
    output that no other function writes and that is not a key or nullable; every field
    marked as a function output is one."""
    names = [fn.name for fn in schema.functions]
    if len(set(names)) != len(names) or not all(names):
        raise _illegal("function names must be given and unique")
    written: set[str] = set()
    for fn in schema.functions:
        source = _one_field(schema, fn, fn.input_fields, "input")
        target = _one_field(schema, fn, fn.output_fields, "output")
        if source.data_type != DataType.VARCHAR or source.analyzer_params is None:
            raise _illegal(
                f"BM25 function {fn.name}: input field {source.name} must be a VarChar field "
                "with enable_analyzer=True"
            )
        if target.data_type != DataType.SPARSE_FLOAT_VECTOR:
            raise _illegal(
                f"BM25 function {fn.name}: output field {target.name} must be a "
                "SparseFloatVector field"
            )
        if target.is_primary or target.is_partition_key or target.nullable:
            raise _illegal(f"function output field {target.name} cannot be a key or nullable")
        if target.name in written:
            raise _illegal(f"field {target.name} is the output of more than one function")
        written.add(target.name)
        target.is_function_output = True  # a REST schema does not mark its outputs
    stray = [f.name for f in schema.fields if f.is_function_output and f.name not in written]
    if stray:
        raise _illegal(f"field {stray[0]} is marked as a function output but no function writes it")


def _one_field(
    schema: CollectionSchema, fn: FunctionSchema, names: list[str], role: str
) -> FieldSchema:
    if len(names) != 1:
        raise _illegal(f"BM25 function {fn.name} takes exactly one {role} field, got {len(names)}")
    field = schema.field(names[0])
    if field is None:
        raise _illegal(f"function {fn.name}: {role} field {names[0]} not found")
    return field


def check_text_match(tree: Expr, schema: CollectionSchema) -> None:
    """Each ``text_match`` and ``phrase_match`` of a filter names a VarChar field with
    ``enable_match=True`` (checked here, so an empty collection refuses it as a full one
    does)."""
    if isinstance(tree, TextMatch | PhraseMatch):
        field = schema.field(tree.operand.name)
        if field is None or field.properties.get(ENABLE_MATCH) != "true":
            what = "text_match" if isinstance(tree, TextMatch) else "phrase_match"
            raise errors.invalid(
                f"field {tree.operand.name} does not enable match: {what} needs a VarChar "
                "field created with enable_match=True"
            )
    for child in tree.children():
        check_text_match(child, schema)


# -- data -------------------------------------------------------------------------------------


def refuse_outputs(schema: CollectionSchema, columns: dict[str, FieldColumn]) -> None:
    """Inserts may not carry a function's output: it is computed from the input."""
    for fn in schema.functions:
        for name in fn.output_fields:
            if name in columns:
                raise errors.invalid(
                    f"field {name} is the output of function {fn.name}: it is computed from "
                    f"{', '.join(fn.input_fields)}, do not provide it"
                )


def run(schema: CollectionSchema, columns: dict[str, FieldColumn], num_rows: int) -> None:
    """Each function's output column, from its input column (already in ``columns``)."""
    for fn in schema.functions:
        [source], [target] = fn.input_fields, fn.output_fields
        texts = _texts(columns[source])
        analyze = analyzer_for(schema, source)
        field = schema.field(target)
        assert field is not None  # validated at create
        rows = [analyze.sparse_row(t) for t in texts]
        assert len(rows) == num_rows
        columns[target] = FieldColumn(field.field_id, target, field.data_type, rows)


def _texts(column: FieldColumn) -> list[str | None]:
    if column.valid is None:
        return list(column.data)
    return [t if ok else None for t, ok in zip(column.data, column.valid, strict=True)]


def analyzer_for(schema: CollectionSchema, name: str) -> analyzer.Analyzer:
    """The analyzer of a VarChar field created with ``enable_analyzer``."""
    field = schema.field(name)
    if field is None or field.analyzer_params is None:
        raise errors.invalid(f"field {name} has no analyzer (enable_analyzer is off)")
    return analyzer.analyzer_of(field.analyzer_params)


def queries(schema: CollectionSchema, field: FieldSchema, group: Any) -> list[bytes]:
    """A search of a BM25 output field: the query texts (VarChar placeholders, as pymilvus
    sends ``data=["text"]``) as sparse rows of their terms."""
    fn = schema.function_of(field.name)
    assert fn is not None
    holder = group.placeholders[0]
    if holder.type != common_pb2.PlaceholderType.VarChar:
        raise errors.invalid(
            f"field {field.name} is the output of BM25 function {fn.name}: search it with "
            "texts (data=['some words']), not vectors"
        )
    analyze = analyzer_for(schema, fn.input_fields[0])
    try:
        texts = [raw.decode() for raw in holder.values]
    except UnicodeDecodeError:
        raise errors.invalid("a query text is not valid UTF-8") from None
    return [analyze.sparse_row(text) for text in texts]


def bm25_params(index_params: dict[str, str], search_params: dict[str, Any]) -> dict[str, Any]:
    """A BM25 search's ``bm25_k1`` and ``bm25_b``: the search's own, else the index's, else
    Milvus's defaults (1.2 and 0.75)."""
    out = dict(search_params)
    for key, default in (("bm25_k1", 1.2), ("bm25_b", 0.75)):
        value = search_params.get(key, index_params.get(key, default))
        try:
            out[key] = float(json.loads(value) if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise errors.invalid(f"{key} must be a number, got {value!r}") from None
    if not 0 <= out["bm25_b"] <= 1 or out["bm25_k1"] < 0:
        raise errors.invalid("bm25_b must be in [0, 1] and bm25_k1 0 or more")
    return out
