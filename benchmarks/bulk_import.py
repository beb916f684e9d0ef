"""``python -m benchmarks.bulk_import``: bulk import rows/s against pymilvus inserts, in one run.

A standalone Vectide (with its Spark data node, as ``vectide up`` runs it) gets ``--rows``
synthetic ``--dim``-d rows twice, into two HNSW collections created with their index and
loaded: once as pymilvus's ``RemoteBulkWriter`` writes them (``--format``, into the
deployment's bucket on SeaweedFS) and ``utility.do_bulk_insert`` imports them (timed from the
request until GetImportState says Completed), once as ``MilvusClient.insert`` calls of
``--batch`` rows (the baseline, timed inside the calls; numpy rows). Each import is followed
by a Strong ``count(*)`` that must see every row, and each phase starts once the deployment
is quiet again (the previous phase's persistence and index builds done). Writing the files
is reported apart: it is the client's work, as the encoding of the inserts is.

    .venv/bin/python -m benchmarks.bulk_import [--rows 100000] [--format PARQUET] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from urllib.parse import urlparse

import numpy as np
from pymilvus import DataType, MilvusClient, connections, utility
from pymilvus.bulk_writer import BulkFileType, RemoteBulkWriter
from pymilvus.client.types import BulkInsertState

from benchmarks.common import log, stop_on_sigterm
from benchmarks.insert_rate import settle
from benchmarks.milvus_ops import connect, create_collection, ingest
from benchmarks.targets import VectideTarget, vectide_target

_DONE = (
    BulkInsertState.ImportCompleted,
    BulkInsertState.ImportFailed,
    BulkInsertState.ImportFailedAndCleaned,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=1000, help="rows per insert call (baseline)")
    p.add_argument("--format", default="PARQUET", choices=["PARQUET", "JSON", "CSV", "NUMPY"])
    p.add_argument("--rounds", type=int, default=3)
    return p.parse_args(argv)


def write_files(target: VectideTarget, vectors: np.ndarray, kind: str) -> list[str]:
    s3 = target.config.s3
    param = RemoteBulkWriter.S3ConnectParam(
        endpoint=urlparse(s3.endpoint).netloc,
        access_key=s3.access_key,
        secret_key=s3.secret_key,
        bucket_name=s3.bucket,
        secure=False,
    )
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
    with RemoteBulkWriter(
        schema=schema,
        remote_path=f"bench/{uuid.uuid4().hex[:8]}",
        connect_param=param,
        file_type=BulkFileType[kind],
        chunk_size=1 << 30,  # one file for the whole set
    ) as writer:
        for i, vector in enumerate(vectors):
            writer.append_row({"id": i, "vector": vector})
        writer.commit()
        return [name for group in writer.batch_files for name in group]


def import_seconds(alias: str, name: str, files: list[str], rows: int) -> float:
    start = time.perf_counter()
    job = utility.do_bulk_insert(name, files=files, using=alias)
    while (state := utility.get_bulk_insert_state(job, using=alias)).state not in _DONE:
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    if state.state != BulkInsertState.ImportCompleted or state.row_count != rows:
        raise SystemExit(f"import {job}: {state}")
    return elapsed


def counted(client: MilvusClient, name: str) -> int:
    return client.query(name, output_fields=["count(*)"], consistency_level="Strong")[0]["count(*)"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    stop_on_sigterm()
    vectors = np.random.default_rng(7).standard_normal((args.rows, args.dim)).astype(np.float32)
    target = vectide_target("bulkimport")
    target.start()
    imported, inserted = [], []
    try:
        client = connect(target.uri)
        connections.connect(alias="bench", uri=target.uri)
        started = time.perf_counter()
        files = write_files(target, vectors, args.format)
        log(
            f"RemoteBulkWriter: {args.rows:,} rows as {args.format} in "
            f"{time.perf_counter() - started:.1f} s ({len(files)} files)"
        )
        pids = target.processes()
        for round_no in range(args.rounds):
            name = f"import_{round_no}"
            create_collection(client, name, args.dim, "L2", "HNSW")
            settle(pids, timeout_s=120)
            seconds = import_seconds("bench", name, files, args.rows)
            assert counted(client, name) == args.rows
            imported.append(args.rows / seconds)
            name = f"insert_{round_no}"
            create_collection(client, name, args.dim, "L2", "HNSW")
            settle(pids, timeout_s=120)
            result = ingest(client, name, vectors, args.batch, False, "insert")
            assert counted(client, name) == args.rows
            inserted.append(args.rows / result.insert_s)
            log(
                f"round {round_no}: import {imported[-1]:,.0f} rows/s, "
                f"pymilvus insert {inserted[-1]:,.0f} rows/s"
            )
    finally:
        connections.disconnect("bench")
        target.stop()
    ratio = statistics.median(imported) / statistics.median(inserted)
    print(f"bulk import ({args.format}) rows/s: " + ", ".join(f"{r:,.0f}" for r in imported))
    print("pymilvus insert rows/s: " + ", ".join(f"{r:,.0f}" for r in inserted))
    print(
        f"medians: import {statistics.median(imported):,.0f}, insert "
        f"{statistics.median(inserted):,.0f} rows/s: import at {ratio:.2f}x"
    )


if __name__ == "__main__":
    main()
