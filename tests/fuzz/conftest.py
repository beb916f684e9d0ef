"""A standalone to fuzz (marked ``fuzz`` and ``integration``): the writer's collection, the
victim collection the fuzzer may write, and the writer and reader running beside it."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from pymilvus import DataType, MilvusClient

from tests.fuzz.harness import Caller, Traffic
from tests.fuzz.strategies import DIM, VICTIM, WRITER
from tests.integration.conftest import free_port, isolated
from vectide.services.launcher import start_standalone

#: requests per run: 1,000 in the default test run, more with ``make test-fuzz``
REQUESTS = int(os.environ.get("VECTIDE_FUZZ_REQUESTS", "1000"))


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/fuzz" in str(item.fspath):
            item.add_marker(pytest.mark.fuzz)
            item.add_marker(pytest.mark.integration)


def _victim_schema(client: MilvusClient):
    schema = client.create_schema(enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("title", DataType.VARCHAR, max_length=64)
    schema.add_field("n", DataType.INT64)
    return schema


@pytest.fixture(scope="package")
def target(infra):
    """One standalone for the whole package, both collections loaded; a raw caller and the
    running traffic."""
    config = isolated(infra, "f")
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port, ingest=False)
    uri = f"http://127.0.0.1:{port}"
    client = MilvusClient(uri)
    client.create_collection(WRITER, dimension=DIM, consistency_level="Strong")
    index = client.prepare_index_params()
    index.add_index("vector", metric_type="L2", index_type="FLAT")
    client.create_collection(
        VICTIM, schema=_victim_schema(client), index_params=index, consistency_level="Strong"
    )
    client.insert(
        VICTIM, [{"id": i, "vector": [float(i)] * DIM, "title": f"t{i}", "n": i} for i in range(50)]
    )
    caller = Caller(f"127.0.0.1:{port}")
    traffic = Traffic(uri).start()
    try:
        yield SimpleNamespace(uri=uri, caller=caller, traffic=traffic, client=client)
    finally:
        traffic.stop()
        caller.close()
        deployment.stop()
