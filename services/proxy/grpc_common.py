"""What every Milvus RPC handler of the proxy shares: the error-to-status wrapper, the OK
status, and how a request names its database, collection and alias."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import grpc
from pymilvus.grpc_gen import common_pb2

from vectide.services.common.errors import MilvusError
from vectide.services.common.names import DEFAULT_DB, qualified
from vectide.services.proxy import convert

log = logging.getLogger(__name__)

#: the Milvus version whose API this proxy speaks (pymilvus checks features against it)
MILVUS_VERSION = "v2.6.0"


def rpc(response_type: type) -> Callable:
    """Turn exceptions into ``response_type(status=...)`` so clients see Milvus errors."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def handler(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return fn(self, request, context)
            except Exception as exc:
                if not isinstance(exc, MilvusError):
                    log.exception("request failed", extra={"rpc": fn.__name__})
                status = convert.error_status(exc)
                if response_type is common_pb2.Status:
                    return status
                return response_type(status=status)

        return handler

    return wrap


def ok() -> common_pb2.Status:
    return convert.ok_status()


def db_of(request: Any, context: grpc.ServicerContext | None) -> str:
    """The request's database: its ``db_name``, else the ``dbname`` header pymilvus sends with
    every call (Milvus's proxy reads it the same way, in its database interceptor), else
    ``default``."""
    name = getattr(request, "db_name", "")
    if not name and context is not None:
        # the last ``dbname`` header wins, as a dict of the metadata would have it
        for key, value in context.invocation_metadata() or ():
            if key == "dbname":
                name = value
    return name or DEFAULT_DB


def ref_of(request: Any, context: grpc.ServicerContext | None) -> str:
    """The request's collection (or alias), qualified by its database ("" when unnamed)."""
    name = request.collection_name
    return qualified(db_of(request, context), name) if name else ""


def alias_of(request: Any, context: grpc.ServicerContext | None) -> str:
    """The request's alias, qualified by its database."""
    return qualified(db_of(request, context), request.alias)
