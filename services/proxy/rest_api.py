"""Milvus's RESTful API v2 (``POST /v2/vectordb/{category}/{action}``) over the gRPC service.

As Milvus's own REST server does, every handler builds the protobuf request a gRPC client
would send and calls the same :class:`MilvusService` method, then shapes the reply as
Milvus's REST server does: ``{"code": 0, "data": ...}`` or ``{"code": n, "message": ...}``.
So REST and gRPC share one implementation of every semantic (validation, consistency,
databases, aliases, errors). No HTTP here: ``handle`` takes a path, a body and headers, and
``rest.py`` serves it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.base import KVError
from vectide.services.common.names import DEFAULT_DB
from vectide.services.common.security.guard import Guard, PermissionDenied, Unauthenticated
from vectide.services.proxy import rest_admin as admin
from vectide.services.proxy import rest_body as rb
from vectide.services.proxy.grpc_auth import CURRENT_USER, admit, audit_reply
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.proxy.rest_call import Handler, RestCall
from vectide.services.proxy.rest_collections import CollectionHandlers
from vectide.services.proxy.rest_entities import EntityHandlers
from vectide.services.proxy.rest_import import import_routes
from vectide.services.proxy.rest_rbac import privilege_group_routes, role_routes, user_routes
from vectide.services.proxy.rest_resource_groups import resource_group_routes

log = logging.getLogger(__name__)

#: the header a client sets to ``false`` to get int64 values as strings (JavaScript)
ALLOW_INT64_HEADER = "Accept-Type-Allow-Int64"


#: Milvus's header giving a request's time limit in seconds (a read waits no longer)
TIMEOUT_HEADER = "Request-Timeout"
#: the bearer token (``user:password``) of the request being handled on this thread
_TOKEN: ContextVar[str | None] = ContextVar("vectide_rest_token", default=None)


class RestContext:
    """What the gRPC handlers read from a ``grpc.ServicerContext``: the database header
    pymilvus sends (``dbname``) and the time left (``Request-Timeout``; none without it)."""

    def __init__(self, db_name: str, deadline: float | None = None) -> None:
        self._metadata = (("dbname", db_name),)
        self._deadline = deadline

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()


def status_of(response: Any) -> common_pb2.Status:
    return response if isinstance(response, common_pb2.Status) else response.status


class RestApi:
    """``guard`` None: authorization is off; else every call a handler makes is admitted
    (credentials, then privileges) exactly as the gRPC interceptor admits it."""

    def __init__(self, service: MilvusService, guard: Guard | None = None) -> None:
        self._service = service
        self._guard = guard
        self.routes: dict[str, Handler] = {
            **_prefixed("collections", CollectionHandlers(self).routes()),
            **_prefixed("entities", EntityHandlers(self).routes()),
            **_prefixed("partitions", admin.partition_routes(self)),
            **_prefixed("indexes", admin.index_routes(self)),
            **_prefixed("databases", admin.database_routes(self)),
            **_prefixed("aliases", admin.alias_routes(self)),
            **_prefixed("jobs/import", import_routes(self)),
            **_prefixed("users", user_routes(self)),
            **_prefixed("roles", role_routes(self)),
            **_prefixed("privilege_groups", privilege_group_routes(self)),
            **_prefixed("resource_groups", resource_group_routes(self)),
        }

    def handle(self, path: str, raw: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """The reply to ``POST path``: never raises, every failure is a Milvus code.
        ``headers`` is case-insensitive when it comes from the HTTP server."""
        try:
            handler = self.routes.get(path)
            if handler is None:
                raise MilvusError(Code.UNIMPLEMENTED, f"no such RESTful v2 endpoint: {path}")
            body = rb.parse_body(raw)
            db = rb.get(body, "dbName", str, "") or headers.get("DB-Name", "") or DEFAULT_DB
            allow = headers.get(ALLOW_INT64_HEADER, "true").strip().lower() != "false"
            _TOKEN.set(bearer(headers.get("Authorization", "")))
            data = handler(RestCall(body, db, allow, _deadline(headers.get(TIMEOUT_HEADER))))
        except MilvusError as exc:
            return {"code": int(exc.code), "message": exc.message}
        except Exception as exc:  # a bug must not become a 500 with a traceback
            log.exception("REST request failed", extra={"path": path})
            return {"code": int(Code.SERVICE_INTERNAL), "message": f"{type(exc).__name__}: {exc}"}
        return data if isinstance(data, dict) and "code" in data else {"code": 0, "data": data}

    def call(self, method: str, request: Any, db_name: str, deadline: float | None = None) -> Any:
        """``MilvusService.<method>(request)``; a failed status raises it as a MilvusError."""
        user = self._admit(method, request, db_name)
        reset = CURRENT_USER.set(user)
        try:
            response = getattr(self._service, method)(request, RestContext(db_name, deadline))
        finally:
            CURRENT_USER.reset(reset)
        audit_reply(user, method, request, response)
        status = status_of(response)
        if status.code or status.error_code:
            known = status.code in Code._value2member_map_ and status.code != 0
            raise MilvusError(Code(status.code) if known else Code.UNEXPECTED, status.reason)
        return response

    def _admit(self, method: str, request: Any, db_name: str) -> str:
        if self._guard is None:
            return ""
        token = _TOKEN.get()
        try:
            if not token:
                raise Unauthenticated("user hasn't authenticated")
            return admit(self._guard, method, request, db_name, token=token)
        except Unauthenticated as exc:
            raise MilvusError(Code.NEED_AUTHENTICATE, str(exc)) from exc
        except PermissionDenied as exc:
            raise MilvusError(Code.PRIVILEGE_NOT_PERMITTED, str(exc)) from exc
        except KVError as exc:
            message = f"cannot read users and roles: {exc}"
            raise MilvusError(Code.SERVICE_UNAVAILABLE, message) from exc

    def schema(self, call: RestCall) -> schema_pb2.CollectionSchema:
        """The collection's schema as DescribeCollection returns it (what rows must match)."""
        request = milvus_pb2.DescribeCollectionRequest(collection_name=call.collection)
        return self.call("DescribeCollection", request, call.db_name).schema

    def empty(self, method: str, request: Any, call: RestCall) -> dict[str, Any]:
        """A call whose REST reply is ``{"code": 0, "data": {}}``."""
        self.call(method, request, call.db_name)
        return {}


def bearer(header: str) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (Milvus's REST credentials)."""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _deadline(header: str | None) -> float | None:
    """``Request-Timeout`` (seconds) as a monotonic deadline; not a positive number: 1801."""
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise rb.bad_format(f"{TIMEOUT_HEADER} must be a positive number of seconds: {header!r}")
    return time.monotonic() + seconds


def _prefixed(category: str, routes: dict[str, Handler]) -> dict[str, Handler]:
    return {f"/v2/vectordb/{category}/{action}": h for action, h in routes.items()}
