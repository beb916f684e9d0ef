"""The client-path ceiling: a Milvus gRPC server that does no work.

Built on pymilvus's own servicer, it answers what ``MilvusClient`` needs to connect, create,
describe, index and load a collection, and answers Insert and Search at once (Insert echoes
the primary keys, Search returns ``limit`` made-up hits per query). Whatever rate pymilvus
reaches against it is the most any server can get through the same client on this machine:
the cost of pymilvus's row conversion, protobuf and gRPC on both ends.

Run as its own process (``python -m benchmarks.nullserver --port P``) so that, like the real
servers, it does not share the client's interpreter lock.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from concurrent import futures
from typing import Any

import grpc
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

_OK = common_pb2.Status(code=0, error_code=common_pb2.Success)
_NOT_FOUND = common_pb2.Status(
    code=100, error_code=common_pb2.CollectionNotExists, reason="collection not found"
)


class NullService(milvus_pb2_grpc.MilvusServiceServicer):
    """Keeps collection schemas (pymilvus converts rows against them) and nothing else."""

    def __init__(self) -> None:
        self._schemas: dict[str, schema_pb2.CollectionSchema] = {}
        self._indexes: dict[str, list[common_pb2.KeyValuePair]] = {}
        self._lock = threading.Lock()

    # -- connection ----------------------------------------------------------------------

    def Connect(self, request: Any, context: Any) -> milvus_pb2.ConnectResponse:
        info = common_pb2.ServerInfo(build_tags="null", deploy_mode="STANDALONE")
        return milvus_pb2.ConnectResponse(status=_OK, server_info=info, identifier=1)

    def GetVersion(self, request: Any, context: Any) -> milvus_pb2.GetVersionResponse:
        return milvus_pb2.GetVersionResponse(status=_OK, version="v2.6.0")

    def CheckHealth(self, request: Any, context: Any) -> milvus_pb2.CheckHealthResponse:
        return milvus_pb2.CheckHealthResponse(status=_OK, isHealthy=True)

    # -- collections ---------------------------------------------------------------------

    def CreateCollection(self, request: Any, context: Any) -> common_pb2.Status:
        schema = schema_pb2.CollectionSchema.FromString(request.schema)
        for i, field in enumerate(schema.fields):
            field.fieldID = 100 + i
        with self._lock:
            self._schemas[request.collection_name] = schema
        return _OK

    def DropCollection(self, request: Any, context: Any) -> common_pb2.Status:
        with self._lock:
            self._schemas.pop(request.collection_name, None)
            self._indexes.pop(request.collection_name, None)
        return _OK

    def HasCollection(self, request: Any, context: Any) -> milvus_pb2.BoolResponse:
        return milvus_pb2.BoolResponse(status=_OK, value=request.collection_name in self._schemas)

    def DescribeCollection(
        self, request: Any, context: Any
    ) -> milvus_pb2.DescribeCollectionResponse:
        schema = self._schemas.get(request.collection_name)
        if schema is None:
            return milvus_pb2.DescribeCollectionResponse(status=_NOT_FOUND)
        return milvus_pb2.DescribeCollectionResponse(
            status=_OK,
            schema=schema,
            collectionID=1,
            collection_name=request.collection_name,
            shards_num=1,
            db_name="default",
            num_partitions=1,
        )

    # -- indexes and load ----------------------------------------------------------------

    def CreateIndex(self, request: Any, context: Any) -> common_pb2.Status:
        with self._lock:
            self._indexes[request.collection_name] = list(request.extra_params)
        return _OK

    def DescribeIndex(self, request: Any, context: Any) -> milvus_pb2.DescribeIndexResponse:
        response = milvus_pb2.DescribeIndexResponse(status=_OK)
        params = self._indexes.get(request.collection_name)
        if params is not None:
            response.index_descriptions.add(
                index_name="vector",
                indexID=1,
                field_name="vector",
                params=params,
                state=common_pb2.Finished,
            )
        return response

    def LoadCollection(self, request: Any, context: Any) -> common_pb2.Status:
        return _OK

    def ReleaseCollection(self, request: Any, context: Any) -> common_pb2.Status:
        return _OK

    def GetLoadingProgress(
        self, request: Any, context: Any
    ) -> milvus_pb2.GetLoadingProgressResponse:
        return milvus_pb2.GetLoadingProgressResponse(status=_OK, progress=100)

    def GetLoadState(self, request: Any, context: Any) -> milvus_pb2.GetLoadStateResponse:
        return milvus_pb2.GetLoadStateResponse(status=_OK, state=common_pb2.LoadStateLoaded)

    def Flush(self, request: Any, context: Any) -> milvus_pb2.FlushResponse:
        return milvus_pb2.FlushResponse(status=_OK, db_name="default")

    def GetFlushState(self, request: Any, context: Any) -> milvus_pb2.GetFlushStateResponse:
        return milvus_pb2.GetFlushStateResponse(status=_OK, flushed=True)

    # -- the data path: answered at once -------------------------------------------------

    def Insert(self, request: Any, context: Any) -> milvus_pb2.MutationResult:
        """Echo the primary keys, as a real server returns them (same response size)."""
        ids = schema_pb2.IDs()
        for field in request.fields_data:
            if field.scalars.HasField("long_data"):
                ids.int_id.data.extend(field.scalars.long_data.data)
                break
        n = request.num_rows
        return milvus_pb2.MutationResult(
            status=_OK,
            IDs=ids,
            succ_index=range(n),
            insert_cnt=n,
            timestamp=time.time_ns() // 1_000_000 << 18,
        )

    def Search(self, request: Any, context: Any) -> milvus_pb2.SearchResults:
        """``topk`` made-up hits per query: the reply pymilvus parses is as big as a real one.

        A requested primary key comes back as an output column too, as a real server sends
        it: pymilvus decodes that column per hit (the benchmarks' ``output_fields=["id"]``
        costs it 50 instead of 18 us a search), and that is the client's path to measure.
        """
        params = {kv.key: kv.value for kv in request.search_params}
        topk = int(params.get("topk", "10"))
        nq = request.nq or 1
        ids = list(range(topk)) * nq
        data = schema_pb2.SearchResultData(
            num_queries=nq,
            top_k=topk,
            topks=[topk] * nq,
            scores=[float(i) for i in range(topk)] * nq,
            primary_field_name="id",
        )
        data.ids.int_id.data.extend(ids)
        if "id" in request.output_fields:
            data.output_fields.append("id")
            column = data.fields_data.add(type=schema_pb2.Int64, field_name="id", field_id=100)
            column.scalars.long_data.data.extend(ids)
        return milvus_pb2.SearchResults(
            status=_OK, results=data, collection_name=request.collection_name
        )


def serve(host: str, port: int, workers: int = 10) -> grpc.Server:
    """Start the server (same thread-pool width as milvus-lite's default)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers),
        options=[
            ("grpc.max_receive_message_length", 512 * 1024 * 1024),
            ("grpc.max_send_message_length", 512 * 1024 * 1024),
            # pymilvus pings every 10 s, also between calls: an idle client (the ceiling
            # waits while Vectide is measured) would get GOAWAY "too many pings" otherwise
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            ("grpc.keepalive_permit_without_calls", 1),
        ],
    )
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(NullService(), server)
    if server.add_insecure_port(f"{host}:{port}") == 0:
        raise OSError(f"cannot listen on {host}:{port}")
    server.start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = serve(args.host, args.port)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop(grace=0.5).wait()


if __name__ == "__main__":
    main()
