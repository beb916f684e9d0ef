"""The Milvus RPCs of users, roles and grants (pymilvus ``create_user``, ``update_password``,
``drop_user``, ``list_users``, ``create_role``, ``grant_role``, ``grant_privilege``,
``describe_role``, ...). A mixin of :class:`services.proxy.grpc_service.MilvusService`, which
supplies ``rbac``; each RPC unpacks its request and calls the security core
(services/common/security/rbac.py). Who may call them is the interceptor's business
(services/proxy/grpc_auth.py), as for every other RPC.
"""

from __future__ import annotations

import base64
import binascii

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from services.common import errors
from services.common.errors import Code, MilvusError
from services.common.names import DEFAULT_DB
from services.common.security.privileges import ANY, COLLECTION, GLOBAL, Grant, api_name
from services.common.security.rbac import Rbac
from services.proxy.grpc_auth import CURRENT_USER
from services.proxy.grpc_common import ok, rpc


def _password(encoded: bytes | str) -> str:
    """pymilvus sends passwords base64-encoded inside the request."""
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise errors.invalid("the password must be base64-encoded UTF-8") from exc


class RbacRpcs:
    rbac: Rbac | None

    def _rbac(self) -> Rbac:
        if self.rbac is None:
            raise MilvusError(Code.UNIMPLEMENTED, "users and roles are not configured")
        return self.rbac

    # -- users ---------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateCredential(self, request, context):
        self._rbac().create_user(request.username, _password(request.password))
        return ok()

    @rpc(common_pb2.Status)
    def UpdateCredential(self, request, context):
        self._rbac().update_password(
            request.username, _password(request.oldPassword), _password(request.newPassword)
        )
        return ok()

    @rpc(common_pb2.Status)
    def DeleteCredential(self, request, context):
        self._rbac().delete_user(request.username)
        return ok()

    @rpc(milvus_pb2.ListCredUsersResponse)
    def ListCredUsers(self, request, context):
        return milvus_pb2.ListCredUsersResponse(status=ok(), usernames=self._rbac().list_users())

    @rpc(milvus_pb2.SelectUserResponse)
    def SelectUser(self, request, context):
        found = self._rbac().select_users(request.user.name if request.HasField("user") else "")
        return milvus_pb2.SelectUserResponse(
            status=ok(),
            results=[
                milvus_pb2.UserResult(
                    user=milvus_pb2.UserEntity(name=name),
                    roles=[milvus_pb2.RoleEntity(name=r) for r in roles]
                    if request.include_role_info
                    else [],
                )
                for name, roles in found
            ],
        )

    # -- roles ---------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateRole(self, request, context):
        self._rbac().create_role(request.entity.name)
        return ok()

    @rpc(common_pb2.Status)
    def DropRole(self, request, context):
        self._rbac().drop_role(request.role_name, force=request.force_drop)
        return ok()

    @rpc(common_pb2.Status)
    def OperateUserRole(self, request, context):
        add = request.type == milvus_pb2.OperateUserRoleType.AddUserToRole
        self._rbac().set_user_role(request.username, request.role_name, member=add)
        return ok()

    @rpc(milvus_pb2.SelectRoleResponse)
    def SelectRole(self, request, context):
        found = self._rbac().select_roles(request.role.name if request.HasField("role") else "")
        return milvus_pb2.SelectRoleResponse(
            status=ok(),
            results=[
                milvus_pb2.RoleResult(
                    role=milvus_pb2.RoleEntity(name=role),
                    users=[milvus_pb2.UserEntity(name=u) for u in users]
                    if request.include_user_info
                    else [],
                )
                for role, users in found
            ],
        )

    # -- grants --------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def OperatePrivilege(self, request, context):
        entity = request.entity
        grant = Grant(
            entity.role.name,
            entity.object.name,
            entity.object_name,
            entity.db_name or DEFAULT_DB,
            entity.grantor.privilege.name,
            CURRENT_USER.get(),
        )
        self._rbac().grant(grant, revoke=request.type == milvus_pb2.OperatePrivilegeType.Revoke)
        return ok()

    @rpc(common_pb2.Status)
    def OperatePrivilegeV2(self, request, context):
        """``grant_privilege_v2``: a collection, or with collection ``*`` the database
        (``*``: every database) as a Global object."""
        collection = request.collection_name or ANY
        grant = Grant(
            request.role.name,
            GLOBAL if collection == ANY else COLLECTION,
            collection,
            request.db_name or DEFAULT_DB,
            request.grantor.privilege.name,
            CURRENT_USER.get(),
        )
        self._rbac().grant(grant, revoke=request.type == milvus_pb2.OperatePrivilegeType.Revoke)
        return ok()

    @rpc(milvus_pb2.SelectGrantResponse)
    def SelectGrant(self, request, context):
        entity = request.entity
        if not entity.role.name:
            raise errors.invalid("the role name of a grant query must not be empty")
        grants = self._rbac().select_grants(
            entity.role.name,
            entity.object.name if entity.HasField("object") else "",
            entity.object_name,
            entity.db_name,
        )
        return milvus_pb2.SelectGrantResponse(
            status=ok(),
            entities=[
                milvus_pb2.GrantEntity(
                    role=milvus_pb2.RoleEntity(name=g.role),
                    object=milvus_pb2.ObjectEntity(name=g.object_type),
                    object_name=g.object_name,
                    db_name=g.db_name,
                    grantor=milvus_pb2.GrantorEntity(
                        user=milvus_pb2.UserEntity(name=g.grantor),
                        privilege=milvus_pb2.PrivilegeEntity(name=api_name(g.privilege)),
                    ),
                )
                for g in grants
            ],
        )
