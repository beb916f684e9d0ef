"""The dataclasses and enums allowed on the internal RPC wire."""

from vectide.services.common.compaction_plan import CompactionPlan, JobState
from vectide.services.common.import_job import ImportJob
from vectide.services.common.msgstream.message import (
    CollectionDDLMsg,
    DataType,
    DDLOp,
    DeleteMsg,
    FieldColumn,
    Position,
)
from vectide.services.common.placement import NodeLoad
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.results import MutationResult, QueryRows, SearchHits, TermStats
from vectide.services.common.rpc import codec
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    DatabaseInfo,
    FieldSchema,
    FunctionSchema,
    IndexInfo,
    PartitionInfo,
)
from vectide.services.common.segment import (
    BatchReport,
    Binlog,
    Deltalog,
    LoadPlan,
    SegmentInfo,
    SegmentState,
)

codec.register(
    DataType,
    ConsistencyLevel,
    FieldSchema,
    FunctionSchema,
    CollectionSchema,
    IndexInfo,
    PartitionInfo,
    CollectionInfo,
    DatabaseInfo,
    ShardSearchRequest,
    ShardQueryRequest,
    SearchHits,
    QueryRows,
    TermStats,
    Position,
    SegmentState,
    SegmentInfo,
    Binlog,
    Deltalog,
    BatchReport,
    LoadPlan,
    FieldColumn,
    MutationResult,
    CompactionPlan,
    JobState,
    ImportJob,
    NodeLoad,
    DeleteMsg,
    CollectionDDLMsg,
    DDLOp,
)

#: methods each role serves, by RPC service name
ROOTCOORD_METHODS = (
    "alloc_timestamp",
    "alloc_ids",
    "create_collection",
    "drop_collection",
    "describe_collection",
    "show_collections",
    "create_partition",
    "drop_partition",
    "create_index",
    "drop_index",
    "alter_index",
    "truncate_collection",
    "report_timetick",
    "read_fence",
    "create_database",
    "drop_database",
    "alter_database",
    "list_databases",
    "describe_database",
    "rename_collection",
    "alter_collection",
    "alter_collection_field",
    "add_collection_field",
    "create_alias",
    "alter_alias",
    "drop_alias",
    "describe_alias",
    "list_aliases",
)
DATACOORD_METHODS = (
    "assign_segment",
    "flush",
    "flushed",
    "save_batch",
    "segments",
    "segment_rows",
    "segment",
    "deltalogs",
    "checkpoint",
    "set_index_file",
    "drop_collection",
    "index_progress",
    "compact",
    "next_compaction",
    "complete_compaction",
    "compaction_state",
    "compaction_plans",
    "new_import",
    "save_import",
    "import_job",
    "import_jobs",
)
QUERYCOORD_METHODS = (
    "load_collection",
    "release_collection",
    "load_state",
    "replicas",
    "load_partitions",
    "release_partitions",
    "loaded_partitions",
    "load_balance",
)
QUERYNODE_METHODS = (
    "watch",
    "unwatch",
    "release",
    "watched",
    "tsafe",
    "search",
    "query",
    "load_segment",
    "sealed_segments",
    "held_segments",
    "release_segments",
    # segments served for other nodes' shards (services/querynode/hosting.py)
    "host_segment",
    "attach_segment",
    "forward",
    "search_segments",
    "query_segments",
    "segment_term_stats",
    "release_hosted",
    "load_report",
)
PROXY_METHODS = (
    "invalidate_collection_cache",
    # the rootcoord asks an idle proxy for a fresh timetick promise
    "wake_timetick",
    # the ingest role's write path
    "describe_collection",
    "insert",
    "upsert",
    "delete_pks",
)
