"""Milvus boolean filter expressions (search ``filter``, query ``expr``, delete by expression).

Parsing is schema-free and yields a tree of frozen dataclasses; evaluation resolves names
against a :class:`ColumnSource` and returns a numpy row mask.
"""

from vectide.services.common.expr.evaluate import ColumnSource, evaluate
from vectide.services.common.expr.parser import Expr, ExprError, parse, pk_terms, referenced_fields

__all__ = [
    "ColumnSource",
    "Expr",
    "ExprError",
    "evaluate",
    "parse",
    "pk_terms",
    "referenced_fields",
]
