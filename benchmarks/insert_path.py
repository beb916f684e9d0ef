"""``python -m benchmarks.insert_path``: the proxy's CPU per insert request, in one process.

What the Insert handler does besides waiting for the broker, measured without a network,
a broker or other processes (so the figure does not move with the shared machine's load as
much as ``benchmarks.insert_rate`` does): pymilvus's InsertRequest of ``--batch`` rows
(int64 keys, numpy float vectors) is parsed, converted to columns (``convert``), run as an
InsertTask through the fault harness's proxy (validation, hashing to shards, the stamp,
segment assignment, building and Avro-encoding the channel messages, the in-memory broker's
write) and answered (``MutationResult``). Prints the median per request over ``--rounds``
rounds and each step's share.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from pymilvus import DataType as ClientType
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import milvus_pb2

from vectide.services.proxy import convert
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness


def request_bytes(rows: int, dim: int) -> bytes:
    fields = [
        {"name": "id", "type": ClientType.INT64, "is_primary": True, "params": {}},
        {"name": "vec", "type": ClientType.FLOAT_VECTOR, "params": {"dim": dim}},
    ]
    vectors = np.random.default_rng(0).random((rows, dim), dtype=np.float32)
    entities = [{"id": i, "vec": v} for i, v in enumerate(vectors)]
    return Prepare.row_insert_param("c", entities, "", fields).SerializeToString()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=100, help="requests per round")
    opts = p.parse_args(argv)
    h = Harness()
    h.create_collection("c", dim=opts.dim, shards=opts.shards)
    raw = request_bytes(opts.batch, opts.dim)
    steps: dict[str, list[float]] = {"parse": [], "columns": [], "insert": [], "reply": []}

    def timed(name: str, fn: Callable[[], object]) -> object:
        start = time.perf_counter()
        out = fn()
        steps[name].append(time.perf_counter() - start)
        return out

    def one() -> None:
        req = timed("parse", lambda: milvus_pb2.InsertRequest.FromString(raw))
        info = h.proxy.meta.get("c")
        columns = timed(
            "columns",
            lambda: convert.columns_from_fields_data(info.schema, req.fields_data, req.num_rows),
        )
        result = timed("insert", lambda: h.proxy.insert("c", "", columns, req.num_rows))
        timed("reply", lambda: MilvusService._mutation(result))

    medians, cpu = [], []
    for _ in range(opts.rounds):
        for s in steps.values():
            s.clear()
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(opts.calls):
            one()
        medians.append((time.perf_counter() - start) / opts.calls)
        cpu.append((time.process_time() - cpu_start) / opts.calls)
    per_call = statistics.median(medians)
    print(
        f"{opts.batch} rows x {opts.dim}-d, {opts.shards} shard(s): {per_call * 1e3:.3f} ms "
        f"per request (rounds: {', '.join(f'{m * 1e3:.3f}' for m in medians)})"
    )
    # CPU of every thread of the process (the harness's query nodes applying the messages
    # too): what a loaded machine changes least
    print(
        f"  CPU {statistics.median(cpu) * 1e3:.3f} ms per request "
        f"(rounds: {', '.join(f'{c * 1e3:.3f}' for c in cpu)})"
    )
    total = sum(sum(s) for s in steps.values())
    for name, s in steps.items():
        print(f"  {name:8s} {sum(s) / total:6.1%}  {statistics.median(s) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
