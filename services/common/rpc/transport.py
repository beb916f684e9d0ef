"""Serve a core object's methods over gRPC, and call them from another process.

``serve(obj, methods, port)`` exposes ``obj.method(*args, **kwargs)`` as
``/vectide.<service>/<method>``; :class:`RpcClient` is a stand-in object whose attribute
calls go over the wire. Errors come back as :class:`MilvusError` with their code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc

from vectide.services.common import tls
from vectide.services.common.config import SecurityConfig
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.rpc import codec

log = logging.getLogger(__name__)

_ERROR_KEY = "vectide-error-bin"
#: between Vectide's own processes: a query node's hits with vectors can be large
MAX_MESSAGE = 256 * 1024 * 1024


#: the service the proxy serves on its Milvus port (which follows ``security.tls_mode``)
PROXY_SERVICE = "Proxy"


@dataclass
class _ProcessTls:
    """This process's TLS for internal RPC: what the internal servers and clients use, and
    what a client of the proxy's port (which serves internal calls too) uses."""

    internal: tls.TlsFiles | None = None
    proxy_port: tls.TlsFiles | None = None


_TLS = _ProcessTls()


def use_tls(cfg: SecurityConfig) -> None:
    """Set this process's internal TLS from config, once at start (as ``use_security`` does
    for Kafka): every :class:`RpcClient` and :func:`add_port` follows it."""
    _TLS.internal = tls.internal_files(cfg)
    _TLS.proxy_port = tls.client_files(cfg)


def add_port(server: grpc.Server, address: str) -> int:
    """Listen on an internal RPC ``address``: mutual TLS when ``security.internal_tls``."""
    return tls.add_port(server, address, _TLS.internal, mutual=True)


def channel_options(
    max_receive: int = MAX_MESSAGE, max_send: int = MAX_MESSAGE
) -> list[tuple[str, int]]:
    """Options of every Vectide server and channel; the proxy passes Milvus's size limits."""
    return [
        ("grpc.max_send_message_length", max_send),
        ("grpc.max_receive_message_length", max_receive),
        # pymilvus pings every 10 s even between calls; gRPC's server default (5 min between
        # pings without data, two strikes) answered an idle client with GOAWAY "too many
        # pings" after ~30 s. Accept what pymilvus, the Node and Java SDKs send, as Milvus's
        # server does (5 s, without calls).
        ("grpc.http2.min_ping_interval_without_data_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1),
        # and, as Milvus's servers, ping a peer idle for 60 s: a dead one is gone 10 s later
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 10_000),
    ]


def method_handler(fn: Callable[..., Any]) -> grpc.RpcMethodHandler:
    def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            args, kwargs = codec.decode(request)
            return codec.encode(fn(*args, **kwargs))
        except Exception as exc:
            if not isinstance(exc, MilvusError):
                log.exception("rpc failed", extra={"method": fn.__name__})
            context.set_trailing_metadata(((_ERROR_KEY, codec.encode_error(exc)),))
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
            raise  # unreachable: abort raises

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=None
    )


def generic_handler(service: str, obj: object, methods: Iterable[str]) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        f"vectide.{service}", {name: method_handler(getattr(obj, name)) for name in methods}
    )


def new_server(
    max_workers: int = 32,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    max_receive: int = MAX_MESSAGE,
    max_send: int = MAX_MESSAGE,
) -> grpc.Server:
    """A threaded gRPC server. It accepts gzip- and deflate-compressed requests as gRPC
    servers do by default (Milvus's registers gzip); replies go uncompressed."""
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=channel_options(max_receive, max_send),
        interceptors=list(interceptors),
    )


class RpcClient:
    """Calls ``service`` methods on ``address``; ``client.search(req)`` is a remote call."""

    def __init__(self, address: str, service: str, timeout_s: float = 60.0) -> None:
        self.address = address
        self._service = service
        self._timeout_s = timeout_s
        self._channel = _open_channel(address, service)
        self._stubs: dict[str, Callable[..., bytes]] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.invoke(name, args, kwargs)

        return call

    def invoke(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout_s: float | None = None,
    ) -> Any:
        """Call ``name`` remotely; ``timeout_s`` overrides the client's deadline."""
        stub = self._stubs.get(name)
        if stub is None:
            stub = self._channel.unary_unary(f"/vectide.{self._service}/{name}")
            self._stubs[name] = stub
        try:
            return codec.decode(
                stub(codec.encode([list(args), kwargs]), timeout=timeout_s or self._timeout_s)
            )
        except grpc.RpcError as exc:
            raise _to_milvus_error(exc, self.address, name) from exc

    def close(self) -> None:
        self._channel.close()


def _open_channel(address: str, service: str) -> grpc.Channel:
    """A channel to ``service``: TLS when its port serves TLS (the proxy's port follows
    ``security.tls_mode``, the other roles' ``security.internal_tls``)."""
    files = _TLS.proxy_port if service == PROXY_SERVICE else _TLS.internal
    if files is None:
        return grpc.insecure_channel(address, options=channel_options())
    options = [*channel_options(), *tls.name_options(files)]
    return grpc.secure_channel(address, tls.channel_credentials(files), options=options)


def _to_milvus_error(exc: grpc.RpcError, address: str, method: str) -> MilvusError:
    for key, value in exc.trailing_metadata() or ():
        if key == _ERROR_KEY:
            return codec.decode_error(value)
    return MilvusError(
        Code.SERVICE_UNAVAILABLE, f"{method} on {address} failed: {exc.code().name} {exc.details()}"
    )
