"""The proxy's metrics interceptor: requests, latency and written rows for every Milvus RPC.

Milvus reports most failures inside a successful gRPC reply (``status.code``), so the status
label is read from the reply: ``0`` for success, the Milvus error code otherwise, or the gRPC
code name when the call itself failed (UNIMPLEMENTED, CANCELLED, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

from vectide.services.common.metrics import PROXY_LATENCY, PROXY_REQUESTS, PROXY_ROWS

MILVUS_SERVICE = "milvus.proto.milvus.MilvusService"
#: MutationResult fields counting rows, by the op label they feed
_ROW_FIELDS = (("insert_cnt", "insert"), ("delete_cnt", "delete"), ("upsert_cnt", "upsert"))


def reply_status(reply: Any) -> str:
    """The Milvus status code of a reply, as a label value."""
    status = reply if reply.DESCRIPTOR.name == "Status" else getattr(reply, "status", None)
    if status is None:
        return "0"
    return str(status.code or status.error_code)  # legacy replies set only error_code


def call_status(reply: Any, context: grpc.ServicerContext) -> str:
    code = context.code()
    if isinstance(code, grpc.StatusCode) and code != grpc.StatusCode.OK:
        return code.name
    return "UNKNOWN" if reply is None else reply_status(reply)  # None: the handler raised


def count_rows(reply: Any) -> None:
    if reply is None or reply.DESCRIPTOR.name != "MutationResult":
        return
    for field, op in _ROW_FIELDS:
        n = getattr(reply, field, 0)
        if n:
            PROXY_ROWS.labels(op).inc(n)


def wrap_milvus_rpcs(
    continuation: Callable[[Any], Any],
    handler_call_details: Any,
    wrap: Callable[[str, Callable[[Any, Any], Any]], Callable[[Any, Any], Any]],
    wrapped: dict[str, Any] | None = None,
) -> Any:
    """The handler of a Milvus API call (all unary) with its behaviour replaced by
    ``wrap(method, inner)``; internal RPCs' and the health service's handlers as they are.

    ``wrapped``: the interceptor's handlers by method path, built once each (a method's
    handler never changes while the server runs; building it again cost every request)."""
    path = handler_call_details.method
    found = wrapped.get(path) if wrapped is not None else None
    if found is not None:
        return found
    handler = continuation(handler_call_details)
    service, _, method = path.lstrip("/").partition("/")
    if handler is not None and handler.unary_unary is not None and service == MILVUS_SERVICE:
        handler = grpc.unary_unary_rpc_method_handler(
            wrap(method, handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler is not None and wrapped is not None:
        wrapped[path] = handler
    return handler


class MetricsInterceptor(grpc.ServerInterceptor):
    """Wraps the Milvus API's handlers; internal RPCs pass untouched."""

    def __init__(self) -> None:
        self._wrapped: dict[str, Any] = {}

    def intercept_service(
        self, continuation: Callable[[Any], Any], handler_call_details: Any
    ) -> Any:
        return wrap_milvus_rpcs(continuation, handler_call_details, _observed, self._wrapped)


def _observed(method: str, inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    #: status -> the method's request counter and latency histogram (``labels`` looks them
    #: up under a lock on every call otherwise)
    series: dict[str, tuple[Any, Any]] = {}
    perf_counter = time.perf_counter
    #: the method's reply is a MutationResult: its rows are counted (a method's reply type
    #: never changes; found on its first reply)
    mutation: list[bool] = []

    def observed(request: Any, context: grpc.ServicerContext) -> Any:
        started = perf_counter()
        reply = None
        try:
            reply = inner(request, context)
            return reply
        finally:
            status = call_status(reply, context)
            found = series.get(status)
            if found is None:
                found = series[status] = (
                    PROXY_REQUESTS.labels(method, status),
                    PROXY_LATENCY.labels(method, status),
                )
            found[0].inc()
            found[1].observe(perf_counter() - started)
            if reply is not None:
                if not mutation:
                    mutation.append(reply.DESCRIPTOR.name == "MutationResult")
                if mutation[0]:
                    count_rows(reply)

    return observed
