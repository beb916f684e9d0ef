"""The proxy's authentication, authorization and audit interceptor (the gRPC adapter of
services/common/security).

When authorization is on, every Milvus RPC must carry an ``authorization`` header that the
:class:`Guard` accepts, else the call fails with gRPC UNAUTHENTICATED; then the privilege the
request message declares (milvus.proto's ``privilege_ext_obj`` option: object type, privilege,
and which field names the object) must be granted to one of the caller's roles, else
PERMISSION_DENIED. Both are what Milvus answers, and pymilvus reports both as errors without
retrying. RPCs whose message declares no privilege (GetVersion, ShowCollections, ...) need
only valid credentials, as in Milvus. DDL and permission changes are audited whether or not
authorization is on; refusals are audited too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import grpc
from pymilvus.grpc_gen import common_pb2

from vectide.services.common.kv.base import KVError
from vectide.services.common.security import audit
from vectide.services.common.security.guard import Guard, PermissionDenied, Unauthenticated
from vectide.services.common.security.privileges import ANY, Requirement
from vectide.services.proxy.grpc_common import db_of
from vectide.services.proxy.interceptor import reply_status, wrap_milvus_rpcs

#: every privilege name Milvus defines (``PrivilegeInsert``, ...): what grants may name
PRIVILEGE_NAMES = frozenset(common_pb2.ObjectPrivilege.keys())
#: the authenticated caller of the RPC being served ("" with authorization off)
CURRENT_USER: ContextVar[str] = ContextVar("vectide_current_user", default="")

#: RPCs written to the audit log: DDL and permission changes
AUDITED = frozenset((
    "CreateCollection", "DropCollection", "RenameCollection", "AlterCollection",
    "AlterCollectionField", "AddCollectionField",
    "CreatePartition", "DropPartition", "CreateIndex", "AlterIndex", "DropIndex",
    "LoadCollection", "ReleaseCollection", "LoadPartitions", "ReleasePartitions", "Flush",
    "CreateDatabase", "DropDatabase", "AlterDatabase", "CreateAlias", "DropAlias", "AlterAlias",
    "CreateCredential", "UpdateCredential", "DeleteCredential", "CreateRole", "DropRole",
    "OperateUserRole", "OperatePrivilege", "OperatePrivilegeV2",
))  # fmt: skip
#: request fields naming what an audited call touched (never a password)
_AUDIT_FIELDS = (
    "db_name", "collection_name", "partition_name", "index_name", "field_name", "alias",
    "oldName", "newName", "newDBName", "username", "role_name", "collection_names",
)  # fmt: skip


def requirement(request: Any, db_name: str) -> Requirement | None:
    """What ``request`` needs, from its message's ``privilege_ext_obj`` option."""
    options = request.DESCRIPTOR.GetOptions()
    if not options.HasExtension(common_pb2.privilege_ext_obj):
        return None
    ext = options.Extensions[common_pb2.privilege_ext_obj]
    if ext.object_name_indexs > 0:
        names = tuple(_field(request, ext.object_name_indexs)) or (ANY,)
    else:
        names = (_object_name(request, ext.object_name_index),)
    return Requirement(
        common_pb2.ObjectType.Name(ext.object_type),
        common_pb2.ObjectPrivilege.Name(ext.object_privilege),
        db_name,
        names,
    )


def _field(request: Any, number: int) -> Any:
    return getattr(request, request.DESCRIPTOR.fields_by_number[number].name)


def _object_name(request: Any, number: int) -> str:
    """The object's name in field ``number`` (in an entity message, its first field), as
    Milvus reads it; ``*`` for none."""
    if number <= 0:
        return ANY
    value = _field(request, number)
    if hasattr(value, "DESCRIPTOR"):
        value = getattr(value, value.DESCRIPTOR.fields_by_number[1].name)
    return str(value) or ANY


def audit_fields(request: Any) -> dict[str, str]:
    """What an audited request touched, as log fields."""
    fields = {}
    for name in _AUDIT_FIELDS:
        if name in request.DESCRIPTOR.fields_by_name:
            value = getattr(request, name)
            if value:
                fields[name] = value if isinstance(value, str) else ",".join(value)
    entity = getattr(request, "entity", None)
    if entity is not None and entity.DESCRIPTOR.name == "GrantEntity":
        fields.update(
            role=entity.role.name,
            object_type=entity.object.name,
            object_name=entity.object_name,
            db_name=entity.db_name,
            privilege=entity.grantor.privilege.name,
        )
    elif entity is not None and entity.DESCRIPTOR.name == "RoleEntity":
        fields["role_name"] = entity.name
    if request.DESCRIPTOR.name == "OperatePrivilegeV2Request":
        fields.update(role=request.role.name, privilege=request.grantor.privilege.name)
    return fields


class AuthInterceptor(grpc.ServerInterceptor):
    """Admits (or refuses) each Milvus RPC and audits it; ``guard`` None: authorization is
    off, every call is admitted as before and only the audit remains."""

    def __init__(self, guard: Guard | None) -> None:
        self._guard = guard
        self._wrapped: dict[str, Any] = {}

    def intercept_service(
        self, continuation: Callable[[Any], Any], handler_call_details: Any
    ) -> Any:
        return wrap_milvus_rpcs(continuation, handler_call_details, self._guarded, self._wrapped)

    def _guarded(self, method: str, inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        if self._guard is None and method not in AUDITED:
            return _unguarded(inner)

        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            user = self._admit(method, request, context)
            token = CURRENT_USER.set(user)
            try:
                reply = inner(request, context)
            finally:
                CURRENT_USER.reset(token)
            audit_reply(user, method, request, reply)
            return reply

        return guarded

    def _admit(self, method: str, request: Any, context: grpc.ServicerContext) -> str:
        """The caller's user name, or the call aborted with Milvus's status."""
        if self._guard is None:
            return ""
        header = dict(context.invocation_metadata() or ()).get("authorization")
        try:
            return admit(self._guard, method, request, db_of(request, context), header=header)
        except Unauthenticated as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except PermissionDenied as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except KVError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"cannot read users and roles: {exc}")
        raise AssertionError("context.abort raises")


def _unguarded(inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A call with authorization off and nothing to audit: run as the anonymous caller
    (``CURRENT_USER`` ""), as ``_guarded`` would, without its steps that do nothing then."""

    def unguarded(request: Any, context: grpc.ServicerContext) -> Any:
        if not CURRENT_USER.get():
            return inner(request, context)
        token = CURRENT_USER.set("")
        try:
            return inner(request, context)
        finally:
            CURRENT_USER.reset(token)

    return unguarded


def admit(
    guard: Guard,
    method: str,
    request: Any,
    db_name: str,
    *,
    header: str | None = None,
    token: str | None = None,
) -> str:
    """The user calling ``method`` with ``request``, from a gRPC ``authorization`` header
    (base64 ``user:password``) or a REST bearer ``token``; raises ``Unauthenticated`` or
    ``PermissionDenied`` (audited) when the call may not run. Shared by every front-end."""
    user = ""
    try:
        user = guard.authenticate(header) if token is None else guard.authenticate_token(token)
        need = requirement(request, db_name)
        if need is not None:
            guard.check(user, need, _role_asked(request))
    except Unauthenticated as exc:
        audit.record(user, method, "unauthenticated", detail=str(exc))
        raise
    except PermissionDenied as exc:
        audit.record(user, method, "denied", detail=str(exc), **audit_fields(request))
        raise
    return user


def audit_reply(user: str, method: str, request: Any, reply: Any) -> None:
    """Audit an answered DDL or permission call with its outcome."""
    if method in AUDITED:
        status = reply_status(reply)
        outcome = "ok" if status == "0" else f"error code={status}"
        audit.record(user, method, outcome, **audit_fields(request))


def _role_asked(request: Any) -> str:
    """SelectGrant's role: a user may list the grants of a role it holds."""
    if request.DESCRIPTOR.name != "SelectGrantRequest":
        return ""
    return request.entity.role.name
