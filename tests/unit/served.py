"""A collection made and filled through the servicer on the fault harness, as pymilvus makes
and fills it (its own request builders): for tests of what the gRPC API answers."""

from __future__ import annotations

from pymilvus import CollectionSchema as ClientSchema
from pymilvus.client.prepare import Prepare

from benchmarks.search_path import Context
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness


def create_loaded(h: Harness, service: MilvusService, schema: ClientSchema, shards: int) -> None:
    """Collection ``c`` of ``schema`` with a FLAT index on its ``vec`` field, loaded."""
    request = Prepare.create_collection_request("c", schema, num_shards=shards)
    assert service.CreateCollection(request, Context()).code == 0
    h.proxy.create_index("c", "vec", "vec", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("c")
    h.tick()


def insert(h: Harness, service: MilvusService, schema: ClientSchema, rows: list[dict]) -> None:
    """``rows`` into ``c``, then ticked and applied: visible to the next read."""
    fields = [
        {"name": f.name, "type": f.dtype, "params": f.params, "nullable": f.nullable}
        for f in schema.fields
    ]
    dynamic = schema.enable_dynamic_field
    request = Prepare.row_insert_param("c", rows, "", fields, enable_dynamic=dynamic)
    assert service.Insert(request, Context()).status.code == 0
    h.tick()
    h.pump()
