"""Collection schemas and meta as plain dataclasses: the vocabulary shared by every role.

The proxy converts Milvus's protobuf schema into these (``services/proxy/convert.py``); the
cores never see protobuf.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from enum import IntEnum
from typing import Any

from vectide.services.common.msgstream.message import FIXED_DTYPES, VECTOR_TYPES, DataType

DYNAMIC_FIELD = "$meta"
#: Milvus numbers user fields from 100 (0 and 1 are the system row id and timestamp fields).
FIRST_FIELD_ID = 100
SUPPORTED_TYPES = frozenset(DataType)
_ROW_BOOKKEEPING_BYTES = 32
_VARIABLE_VALUE_BYTES = 64
#: what a scalar index holds per row in a query node: a sorted copy of the value (a number,
#: or a reference to the string) and the row it came from
SCALAR_INDEX_ROW_BYTES = 16


class ConsistencyLevel(IntEnum):
    """common.proto's ConsistencyLevel values, as pymilvus sends them."""

    STRONG = 0
    SESSION = 1
    BOUNDED = 2
    EVENTUALLY = 3
    CUSTOMIZED = 4


@dataclass
class FieldSchema:
    field_id: int
    name: str
    data_type: DataType
    is_primary: bool = False
    auto_id: bool = False
    dim: int = 0
    max_length: int = 0
    is_dynamic: bool = False
    description: str = ""
    #: Milvus's partition key: kept and reported; rows stay in one partition, so a filter on
    #: the key finds them as it would, without pruning partitions
    is_partition_key: bool = False
    #: Milvus 2.5's nullable scalar fields: rows may hold no value (None in clients)
    nullable: bool = False
    #: the value a row gets when it gives none (or null); None when the field has no default
    default_value: bool | int | float | str | None = None
    #: ARRAY fields: the elements' DataType code, and at most how many a row holds
    element_type: int = 0
    max_capacity: int = 0
    #: other type params a client set, kept and described: AlterCollectionField's
    #: ``mmap.enabled`` (no effect), and a VarChar's ``enable_analyzer``,
    #: ``analyzer_params`` (JSON) and ``enable_match`` (full-text search, ``analyzer.py``)
    properties: dict[str, str] = field(default_factory=dict)
    #: a sparse vector field whose rows a function computes (BM25): clients never send it
    is_function_output: bool = False

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @staticmethod
    def from_dict(data: dict[str, Any]) -> FieldSchema:
        return FieldSchema(**{**data, "data_type": DataType(data["data_type"])})

    @staticmethod
    def from_json(raw: bytes) -> FieldSchema:
        return FieldSchema.from_dict(json.loads(raw))

    @property
    def is_vector(self) -> bool:
        return self.data_type in VECTOR_TYPES

    @property
    def is_fixed_width(self) -> bool:
        return self.data_type in FIXED_DTYPES

    @property
    def analyzer_params(self) -> str | None:
        """The field's analyzer (JSON), when its text is analyzed (``enable_analyzer``)."""
        if self.properties.get(ENABLE_ANALYZER, "").lower() != "true":
            return None
        return self.properties.get(ANALYZER_PARAMS, "")


#: a VarChar field's type params that make its text analyzed, and how
ENABLE_ANALYZER = "enable_analyzer"
ANALYZER_PARAMS = "analyzer_params"
ENABLE_MATCH = "enable_match"


@dataclass
class FunctionSchema:
    """A schema function (Milvus 2.5): BM25 turns an analyzed VarChar field's text into the
    sparse vector of its output field, at insert and for a search's query text."""

    name: str
    #: Milvus's FunctionType name; only ``BM25`` runs in Vectide
    function_type: str
    input_fields: list[str]
    output_fields: list[str]
    params: dict[str, str] = field(default_factory=dict)
    description: str = ""

    @staticmethod
    def from_dict(data: dict[str, Any]) -> FunctionSchema:
        return FunctionSchema(**data)


@dataclass
class CollectionSchema:
    name: str
    fields: list[FieldSchema]
    description: str = ""
    enable_dynamic_field: bool = False
    functions: list[FunctionSchema] = field(default_factory=list)

    @property
    def primary(self) -> FieldSchema:
        return next(f for f in self.fields if f.is_primary)

    @property
    def vector_fields(self) -> list[FieldSchema]:
        return [f for f in self.fields if f.is_vector]

    @property
    def dynamic_field(self) -> FieldSchema | None:
        return next((f for f in self.fields if f.is_dynamic), None)

    def field(self, name: str) -> FieldSchema | None:
        return next((f for f in self.fields if f.name == name), None)

    def function_of(self, output_field: str) -> FunctionSchema | None:
        """The function computing ``output_field``, if one does."""
        return next((f for f in self.functions if output_field in f.output_fields), None)

    def with_field(self, added: FieldSchema) -> CollectionSchema:
        """This schema with ``added`` after its own fields (AddCollectionField; ``$meta``, the
        dynamic field, stays last)."""
        fields = [f for f in self.fields if not f.is_dynamic]
        dynamic = [f for f in self.fields if f.is_dynamic]
        return replace(self, fields=[*fields, added, *dynamic])

    def row_bytes(self) -> int:
        """What a row costs a query node in memory, roughly: fixed-width values at their
        width, variable ones at a typical 64 bytes, plus the per-row bookkeeping (insert and
        delete stamps, partition, segment: 32 bytes) and each vector's squared norm. The
        balancer weighs segments by it, before they are loaded and after."""
        total = _ROW_BOOKKEEPING_BYTES
        for f in self.fields:
            dtype = FIXED_DTYPES.get(f.data_type)
            if dtype is None:
                total += _VARIABLE_VALUE_BYTES
                continue
            total += dtype.itemsize * max(f.dim, 1) + (4 if f.is_vector else 0)
        return total


#: a JSON path index's params (Milvus's keys): the path, in its canonical filter text, and
#: the type of the values it indexes there
JSON_PATH, JSON_CAST_TYPE = "json_path", "json_cast_type"
#: an NGRAM index's sizes (Milvus's keys)
MIN_GRAM, MAX_GRAM = "min_gram", "max_gram"


@dataclass
class IndexInfo:
    """An index on one field (vector or scalar); built per segment (growing chunks, sealed
    segments). A scalar index has no metric type."""

    index_id: int
    index_name: str
    field_name: str
    index_type: str
    metric_type: str
    params: dict[str, str] = field(default_factory=dict)
    create_ts: int = 0
    #: AlterIndex's properties (``mmap.enabled``): kept and described, no effect on the build
    properties: dict[str, str] = field(default_factory=dict)

    def scalar_entry(self) -> tuple[str, str]:
        """(what filters find it by, what it holds) of a scalar index: its field, or a JSON
        path index's path (``expr.parser.path_text``); its index type, a JSON path's cast
        type, or NGRAM with its sizes (``NGRAM:2:3``)."""
        key = self.params.get(JSON_PATH, self.field_name)
        if self.index_type == "NGRAM":  # a VarChar field, or a JSON path cast to VARCHAR
            return key, f"NGRAM:{self.params[MIN_GRAM]}:{self.params[MAX_GRAM]}"
        if JSON_CAST_TYPE in self.params:
            return key, self.params[JSON_CAST_TYPE]
        return key, self.index_type


def ngram_sizes(entry: str) -> tuple[int, int] | None:
    """(min_gram, max_gram) of an NGRAM ``scalar_entry``; None for another index."""
    kind, _, sizes = entry.partition(":")
    if kind != "NGRAM":
        return None
    low, high = sizes.split(":")
    return int(low), int(high)


@dataclass
class PartitionInfo:
    partition_id: int
    name: str
    create_ts: int


@dataclass
class DatabaseInfo:
    """A database: a namespace of collections (Milvus 2.2.9+); ``default`` always exists."""

    db_id: int
    name: str
    create_ts: int
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class CollectionInfo:
    collection_id: int
    name: str
    schema: CollectionSchema
    shards_num: int
    #: vchannel names, shard k at index k
    vchannels: list[str]
    #: the pchannel carrying each vchannel (same order)
    pchannels: list[str]
    consistency_level: ConsistencyLevel
    create_ts: int
    #: offset of the CreateCollection DDL in each pchannel: where consumers start reading
    start_offsets: dict[str, int] = field(default_factory=dict)
    partitions: list[PartitionInfo] = field(default_factory=list)
    indexes: list[IndexInfo] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    #: when the schema last changed (AddCollectionField, AlterCollectionField; 0: never):
    #: DescribeCollection's ``update_timestamp``, which clients send back with inserts
    update_ts: int = 0
    #: the serialized schema.proto as the client sent it (DescribeCollection echoes it)
    raw_schema: bytes = b""
    #: the database holding it; catalogs written before databases existed read as default
    db_name: str = "default"
    #: the stamp of the last TruncateCollection (0: never): reads at or after it return no
    #: row inserted before it, and compaction and garbage collection remove those rows
    truncated_ts: int = 0

    def partition(self, name: str) -> PartitionInfo | None:
        return next((p for p in self.partitions if p.name == name), None)

    def index_on(self, field_name: str) -> IndexInfo | None:
        return next((i for i in self.indexes if i.field_name == field_name), None)

    def row_bytes(self) -> int:
        """A row's memory in a query node (``CollectionSchema.row_bytes``) with its scalar
        indexes' share."""
        return self.schema.row_bytes() + SCALAR_INDEX_ROW_BYTES * len(self.scalar_indexes())

    def scalar_indexes(self) -> dict[str, str]:
        """Index type per indexed scalar field, cast type per indexed JSON path (filters on
        them use the index)."""
        vectors = {f.name for f in self.schema.vector_fields}
        return dict(i.scalar_entry() for i in self.indexes if i.field_name not in vectors)
