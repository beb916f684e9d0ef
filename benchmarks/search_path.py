"""``python -m benchmarks.search_path``: the CPU of one settled search, stage by stage, in one
process.

What the standalone spends per search besides gRPC's own transport, measured without a
network, a broker or other processes (so the figure moves with the shared machine's load far
less than ``benchmarks.search_rate``'s): a fault harness (services/testing.py: the real proxy,
coordinators and query node cores on an in-memory broker and object store) gets ``--rows``
synthetic rows in an HNSW collection (M=16, efConstruction=128, as ``search_rate``), flushed,
its index file built and handed to the query node, as a settled collection is. Then the
SearchRequest pymilvus's ``MilvusClient.search`` sends (one query, k=10, ``output_fields=["id"]``,
Bounded, ``ef``) is parsed, run through the proxy's interceptors (metrics, auth) and
``MilvusService.Search``, and its reply serialized, ``--calls`` times a round, on this thread:
every part of a search runs on it, so ``time.thread_time`` counts the whole search.

Prints the CPU microseconds a search over ``--rounds`` rounds (median), then a round with
each stage timed (self time: a stage's time without the stages inside it; the timers cost a
little each, so their total is above the plain figure), and with ``--profile`` cProfile's top
functions.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import pstats
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import faiss
import grpc
import numpy as np
from grpc import _interceptor
from pymilvus.client import ts_utils
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import milvus_pb2

from benchmarks import datasets
from vectide.services.common.msgstream.message import DataType, FieldColumn
from vectide.services.common.schema import (
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.proxy import dql, grpc_search, task_scheduler
from vectide.services.proxy.grpc_auth import AuthInterceptor
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.proxy.interceptor import MILVUS_SERVICE, MetricsInterceptor
from vectide.services.querynode import core as querynode_core
from vectide.services.querynode import reads
from vectide.services.querynode.core import QueryNode
from vectide.services.testing import Harness

NAME = "search_path"
SEARCH = f"/{MILVUS_SERVICE}/Search"


# -- the settled collection ---------------------------------------------------------------------


def settled_harness(data: datasets.Dataset, batch: int = 10_000) -> Harness:
    """A harness whose collection holds ``data`` in sealed segments searched through their
    HNSW index files (the state ``search_rate`` measures)."""
    h = Harness()
    schema = CollectionSchema(
        NAME,
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vector", DataType.FLOAT_VECTOR, dim=data.dim),
        ],
    )
    h.proxy.create_collection(schema, 1, ConsistencyLevel.BOUNDED, {}, b"")
    index = {"index_type": "HNSW", "metric_type": data.metric, "M": 16, "efConstruction": 128}
    h.proxy.create_index(NAME, "vector", "vector", index)
    h.proxy.load_collection(NAME)
    h.tick()
    for start in range(0, data.rows, batch):
        block = data.vectors[start : start + batch]
        keys = np.arange(start, start + len(block), dtype=np.int64)
        columns = {
            "id": FieldColumn(100, "id", DataType.INT64, keys),
            "vector": FieldColumn(101, "vector", DataType.FLOAT_VECTOR, block, data.dim),
        }
        h.proxy.insert(NAME, "", columns, len(block))
    h.tick()
    h.proxy.flush([NAME])
    h.step()
    built = h.coordinators.indexes.run_once()
    h.coordinators.querycoord.handoff()
    h.pump()
    # Bounded reads are at the wall clock less the graceful time: the harness's clock (its
    # TSO, so its tsafe) runs an hour ahead, so every Bounded read is served at once
    h.advance(3_600_000)
    print(f"{data.rows:,} rows x {data.dim}-d, {built} HNSW index file(s): {_served(h)}")
    return h


def _served(h: Harness) -> str:
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    kinds = []
    for shard in node._shards.values():
        kinds.append(f"growing {shard.store.num_rows:,}")
        for segment in shard.sealed.values():
            built = segment.indexes["vector"].built() if "vector" in segment.indexes else []
            names = ",".join(type(i).__name__ for i in built) or "no index"
            kinds.append(f"sealed {segment.num_rows:,} ({names})")
    return "; ".join(kinds)


# -- the request and the handler the server runs ------------------------------------------------


def request_bytes(query: np.ndarray, k: int, ef: int, metric: str) -> bytes:
    """The SearchRequest ``MilvusClient.search(NAME, [query], limit=k, output_fields=["id"],
    search_params=..., consistency_level="Bounded")`` sends (pymilvus's own builders)."""
    kwargs: dict[str, Any] = {"consistency_level": "Bounded"}
    default = ts_utils.construct_guarantee_ts(NAME, kwargs, "127.0.0.1:19530", "")
    request = Prepare.search_requests_with_expr(
        collection_name=NAME,
        anns_field="",
        param={"metric_type": metric, "params": {"ef": ef}},
        limit=k,
        data=[query.tolist()],
        expr=None,
        output_fields=["id"],
        expr_params={},
        use_default_consistency=default,
        **kwargs,
    )
    return request.SerializeToString()


class Context:
    """The ``grpc.ServicerContext`` a handler sees: pymilvus's metadata, no deadline."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("client-request-unixmilli", "0"),)

    def time_remaining(self) -> float | None:
        return None

    def code(self) -> grpc.StatusCode | None:
        return None

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise RuntimeError(f"{code}: {details}")


@dataclass
class HandlerCallDetails:
    method: str
    invocation_metadata: tuple = ()


class ServerHandlers:
    """Search's method handler found per call as the proxy's gRPC server finds it: through its
    interceptors' pipeline (metrics outermost, then auth without authorization), around
    ``search`` (the servicer's method, or a timed stand-in)."""

    def __init__(self, search: Callable[..., Any], stages: Stages | None = None) -> None:
        decode = milvus_pb2.SearchRequest.FromString
        encode = milvus_pb2.SearchResults.SerializeToString
        if stages is not None:
            search = stages.timed("handler", search)
            decode = stages.timed("request decoding", decode)
            encode = stages.timed("reply serialization", encode)
        base = grpc.unary_unary_rpc_method_handler(
            search, request_deserializer=decode, response_serializer=encode
        )
        self._base = lambda _details: base
        self._pipeline = _interceptor.service_pipeline(
            [MetricsInterceptor(), AuthInterceptor(None)]
        )
        self._find = self._pipeline.execute
        self._stages = stages
        #: the handler the pipeline finds -> the same with its interceptors timed
        self._timed: dict[int, Any] = {}
        if stages is not None:
            self._find = stages.timed("interceptors", self._find)

    def find(self) -> Any:
        details = HandlerCallDetails(SEARCH, (("client-request-unixmilli", "0"),))
        handler = self._find(self._base, details)
        if self._stages is None:
            return handler
        timed = self._timed.get(id(handler))
        if timed is None:
            timed = self._timed[id(handler)] = handler._replace(
                unary_unary=self._stages.timed("interceptors", handler.unary_unary)
            )
        return timed


# -- stage timers -------------------------------------------------------------------------------


@dataclass
class Stages:
    """Thread CPU by stage, self time: a stage's clock stops while a stage inside it runs.

    The timers cost CPU themselves (``thread_time`` is a system call): :meth:`corrected`
    takes off what :meth:`calibrate` measured a timed call to charge to its own stage and to
    the stage around it."""

    seconds: dict[str, float] = field(default_factory=dict)
    #: stage -> times entered, and times a stage was entered inside it
    entries: dict[str, int] = field(default_factory=dict)
    nested: dict[str, int] = field(default_factory=dict)
    _stack: list[str] = field(default_factory=list)
    _mark: float = 0.0

    def enter(self, name: str) -> None:
        now = time.thread_time()
        if self._stack:
            top = self._stack[-1]
            self.seconds[top] = self.seconds.get(top, 0.0) + now - self._mark
            self.nested[top] = self.nested.get(top, 0) + 1
        self._stack.append(name)
        self.entries[name] = self.entries.get(name, 0) + 1
        self._mark = now

    def leave(self) -> None:
        now = time.thread_time()
        top = self._stack.pop()
        self.seconds[top] = self.seconds.get(top, 0.0) + now - self._mark
        self._mark = now

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            self.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        return run

    def clear(self) -> None:
        self.seconds.clear()
        self.entries.clear()
        self.nested.clear()

    @staticmethod
    def calibrate(calls: int = 20_000) -> tuple[float, float]:
        """Seconds a timed call of a function doing nothing adds to its own stage and to
        the stage around it."""
        probe = Stages()
        inner = probe.timed("inner", lambda: None)

        def outer() -> None:
            for _ in range(calls):
                inner()

        probe.timed("outer", outer)()
        return probe.seconds["inner"] / calls, probe.seconds["outer"] / calls

    def corrected(self, own: float, around: float) -> dict[str, float]:
        return {
            name: max(
                seconds - own * self.entries.get(name, 0) - around * self.nested.get(name, 0),
                0.0,
            )
            for name, seconds in self.seconds.items()
        }


#: (where, attribute, stage): the functions timed, each charged to its stage; the order is the
#: order stages are printed in
STAGE_POINTS: list[tuple[Any, str, str]] = [
    (grpc_search.SearchRpcs, "_search_spec", "request -> spec"),
    (MilvusService, "_read_common", "request -> spec"),
    (task_scheduler.TaskScheduler, "run", "task: scheduler"),
    (dql.SearchTask, "pre_execute", "task: pre_execute"),
    (dql.SearchTask, "execute", "task: execute, merge"),
    (dql._ReadTask, "_guarantee", "guarantee ts"),
    (QueryNode, "search", "query node: request"),
    (QueryNode, "_search_shard", "query node: shard, lock"),
    (QueryNode, "_snapshot", "query node: tsafe"),
    (querynode_core, "ensure_indexes", "query node: shard, lock"),
    (reads.SealedVisibility, "visible", "query node: mask"),
    (querynode_core, "search_store", "query node: hits"),
    (reads, "_search_band", "query node: store search"),
    (querynode_core, "reduce_hits", "query node: merge"),
    (reads, "reduce_hits", "query node: merge"),
    (grpc_search.convert, "search_results", "reply"),
]


@contextmanager
def timed_stages(stages: Stages, index_types: list[type]) -> Iterator[None]:
    """Every stage point (and each faiss index type's ``search``) wrapped while inside."""
    points = [*STAGE_POINTS, *((t, "search", "faiss") for t in index_types)]
    saved = []
    for where, attr, stage in points:
        own = vars(where).get(attr, _MISSING)  # restored as found: own, or inherited
        saved.append((where, attr, own))
        timed = stages.timed(stage, getattr(where, attr))
        static = isinstance(inspect.getattr_static(where, attr), staticmethod)
        setattr(where, attr, staticmethod(timed) if static else timed)
    try:
        yield
    finally:
        for where, attr, own in reversed(saved):
            if own is _MISSING:
                delattr(where, attr)
            else:
                setattr(where, attr, own)


_MISSING = object()


def index_types(h: Harness) -> list[type]:
    """The faiss index classes the settled segments are searched through."""
    found: set[type] = set()
    for node_id in h.nodes.live_nodes():
        for shard in h.nodes.node(node_id)._shards.values():
            for segment in shard.sealed.values():
                for indexes in segment.indexes.values():
                    found.update(type(i) for i in indexes.built())
    return sorted((t for t in found if issubclass(t, faiss.Index)), key=lambda t: t.__name__)


# -- the loop -----------------------------------------------------------------------------------


def search_once(handlers: ServerHandlers, raw: bytes, context: Context) -> bytes:
    """One search as the server runs it: its handler found, the request parsed, the handler
    chain run, the reply serialized."""
    handler = handlers.find()
    request = handler.request_deserializer(raw)
    reply = handler.unary_unary(request, context)
    if reply.status.code:
        raise RuntimeError(f"search failed: {reply.status.reason}")
    return handler.response_serializer(reply)


def cpu_per_call(run: Callable[[], object], calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        run()
    return (time.thread_time() - start) / calls


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--ef", type=int, default=64)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=2000, help="searches per round")
    p.add_argument("--profile", action="store_true", help="cProfile a round")
    p.add_argument("--top", type=int, default=30, help="functions the profile prints")
    opts = p.parse_args(argv)
    faiss.omp_set_num_threads(1)  # one thread a search, as server processes run faiss
    data = datasets.synthetic(opts.rows, opts.dim, 100, opts.k)
    h = settled_harness(data)
    service = MilvusService(h.proxy)
    context = Context()
    queries = [request_bytes(q, opts.k, opts.ef, data.metric) for q in data.queries]
    turn = iter(range(1 << 62))

    def one(handlers: ServerHandlers) -> bytes:
        return search_once(handlers, queries[next(turn) % len(queries)], context)

    plain = ServerHandlers(service.Search)
    for _ in range(200):  # warm caches (names, params, masks) and the interpreter
        one(plain)
    rounds = [cpu_per_call(lambda: one(plain), opts.calls) for _ in range(opts.rounds)]
    print(
        f"CPU a search: {statistics.median(rounds) * 1e6:.0f} us "
        f"(rounds: {', '.join(f'{r * 1e6:.0f}' for r in rounds)})"
    )
    stages = Stages()
    timed = ServerHandlers(service.Search, stages)
    with timed_stages(stages, index_types(h)):
        for _ in range(50):
            one(timed)
        stages.clear()
        cpu = cpu_per_call(lambda: one(timed), opts.calls)
    print_stages(stages, cpu, opts.calls)
    if opts.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(opts.calls):
            one(plain)
        profiler.disable()
        pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(opts.top)


def print_stages(stages: Stages, cpu: float, calls: int) -> None:
    """Each stage's self time, CPU microseconds a search, less what its timers cost."""
    own, around = Stages.calibrate()
    seconds = stages.corrected(own, around)
    timers = sum(stages.seconds.values()) - sum(seconds.values())
    order = [
        "request decoding",
        "interceptors",
        "handler",
        *dict.fromkeys(stage for _, _, stage in STAGE_POINTS),
        "faiss",
        "reply serialization",
    ]
    print(
        f"by stage (the timed round: {cpu * 1e6:.0f} us a search, of which the timers "
        f"{timers / calls * 1e6:.0f} us; self times without them):"
    )
    for name in order:
        print(f"  {name:28s} {seconds.get(name, 0.0) / calls * 1e6:7.1f} us")
    rest = cpu - sum(stages.seconds.values()) / calls
    print(f"  {'(outside every stage)':28s} {rest * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
