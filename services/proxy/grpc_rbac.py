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
from collections.abc import Sequence
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.security.privileges import (
    ANY,
    COLLECTION,
    GLOBAL,
    GROUP_PREFIX,
    Grant,
    api_name,
    check_level,
)
from vectide.services.common.security.rbac import Rbac, RbacBackup
from vectide.services.common.security.store import User
from vectide.services.proxy.grpc_auth import CURRENT_USER
from vectide.services.proxy.grpc_common import db_of, ok, rpc


def _password(encoded: bytes | str) -> str:
    """pymilvus sends passwords base64-encoded inside the request."""
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise errors.invalid("the password must be base64-encoded UTF-8") from exc


#: SelectUser's and SelectRole's result: its type, the entity field naming the user (role)
#: and its type, the field listing the related roles (users) and their type
_USER_RESULT = (
    milvus_pb2.UserResult,
    "user",
    milvus_pb2.UserEntity,
    "roles",
    milvus_pb2.RoleEntity,
)
_ROLE_RESULT = (
    milvus_pb2.RoleResult,
    "role",
    milvus_pb2.RoleEntity,
    "users",
    milvus_pb2.UserEntity,
)


def _named(request: Any, field: str) -> str:
    """The name in the request's ``field`` entity, "" (everyone) when it is not set."""
    return getattr(request, field).name if request.HasField(field) else ""


def _results(shape: tuple, found: list[tuple[str, list[str]]], include: bool) -> list:
    """Each name as an entity with its related ones when the request asks for them."""
    result_type, own, own_type, related, related_type = shape
    return [
        result_type(**{own: own_type(name=name), related: [related_type(name=r) for r in others]})
        for name, others in ((n, o if include else []) for n, o in found)
    ]


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
        found = self._rbac().select_users(_named(request, "user"))
        results = _results(_USER_RESULT, found, request.include_role_info)
        return milvus_pb2.SelectUserResponse(status=ok(), results=results)

    # -- roles ---------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreateRole(self, request, context):
        self._rbac().create_role(request.entity.name, request.entity.description)
        return ok()

    @rpc(common_pb2.Status)
    def AlterRole(self, request, context):
        self._rbac().alter_role(request.role_name, request.description)
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
        found = self._rbac().select_roles(_named(request, "role"))
        results = _results(_ROLE_RESULT, found, request.include_user_info)
        descriptions = self._rbac().role_descriptions()
        for result in results:
            result.role.description = descriptions.get(result.role.name, "")
        return milvus_pb2.SelectRoleResponse(status=ok(), results=results)

    # -- grants --------------------------------------------------------------------------

    @rpc(common_pb2.Status)
    def OperatePrivilege(self, request, context):
        entity = request.entity
        grant = Grant(
            entity.role.name,
            entity.object.name,
            entity.object_name,
            db_of(entity, context),
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
        db_name = db_of(request, context)
        privilege = request.grantor.privilege.name
        check_level(GROUP_PREFIX + privilege, db_name, collection)
        grant = Grant(
            request.role.name,
            GLOBAL if collection == ANY else COLLECTION,
            collection,
            db_name,
            privilege,
            CURRENT_USER.get(),
        )
        self._rbac().grant(grant, revoke=request.type == milvus_pb2.OperatePrivilegeType.Revoke)
        return ok()

    # -- privilege groups ----------------------------------------------------------------

    @rpc(common_pb2.Status)
    def CreatePrivilegeGroup(self, request, context):
        self._rbac().create_privilege_group(request.group_name)
        return ok()

    @rpc(common_pb2.Status)
    def DropPrivilegeGroup(self, request, context):
        self._rbac().drop_privilege_group(request.group_name)
        return ok()

    @rpc(milvus_pb2.ListPrivilegeGroupsResponse)
    def ListPrivilegeGroups(self, request, context):
        groups = [_group_info(*group) for group in self._rbac().privilege_groups().items()]
        return milvus_pb2.ListPrivilegeGroupsResponse(status=ok(), privilege_groups=groups)

    @rpc(common_pb2.Status)
    def OperatePrivilegeGroup(self, request, context):
        remove = request.type == milvus_pb2.OperatePrivilegeGroupType.RemovePrivilegesFromGroup
        privileges = [p.name for p in request.privileges]
        self._rbac().change_privilege_group(request.group_name, privileges, remove)
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
            db_of(entity, context),
        )
        return milvus_pb2.SelectGrantResponse(
            status=ok(), entities=[_grant_entity(g, api_name(g.privilege)) for g in grants]
        )

    # -- backup and restore ----------------------------------------------------------------

    @rpc(milvus_pb2.BackupRBACMetaResponse)
    def BackupRBAC(self, request, context):
        """The Node SDK's ``backupRBAC``: users but root (with their password hashes), roles,
        grants and privilege groups, for RestoreRBAC on this or another cluster."""
        backup = self._rbac().backup()
        meta = milvus_pb2.RBACMeta(
            users=[
                milvus_pb2.UserInfo(
                    user=u.name,
                    password=u.password_hash,
                    roles=[milvus_pb2.RoleEntity(name=r) for r in u.roles],
                )
                for u in backup.users
            ],
            roles=[milvus_pb2.RoleEntity(name=n, description=d) for n, d in backup.roles.items()],
            grants=[_grant_entity(g, g.privilege) for g in backup.grants],
            privilege_groups=[_group_info(*group) for group in backup.groups.items()],
        )
        return milvus_pb2.BackupRBACMetaResponse(status=ok(), RBAC_meta=meta)

    @rpc(common_pb2.Status)
    def RestoreRBAC(self, request, context):
        """The Node SDK's ``restoreRBAC``: all of a backup, or nothing when a user, role or
        group in it exists already."""
        meta = request.RBAC_meta
        self._rbac().restore(
            RbacBackup(
                users=tuple(
                    User(u.user, u.password, tuple(r.name for r in u.roles)) for u in meta.users
                ),
                roles={r.name: r.description for r in meta.roles},
                grants=tuple(
                    Grant(
                        g.role.name,
                        g.object.name,
                        g.object_name,
                        g.db_name,
                        g.grantor.privilege.name,
                        g.grantor.user.name,
                    )
                    for g in meta.grants
                ),
                groups={
                    p.group_name: tuple(e.name for e in p.privileges) for p in meta.privilege_groups
                },
            )
        )
        return ok()


def _grant_entity(grant: Grant, privilege: str) -> milvus_pb2.GrantEntity:
    return milvus_pb2.GrantEntity(
        role=milvus_pb2.RoleEntity(name=grant.role),
        object=milvus_pb2.ObjectEntity(name=grant.object_type),
        object_name=grant.object_name,
        db_name=grant.db_name,
        grantor=milvus_pb2.GrantorEntity(
            user=milvus_pb2.UserEntity(name=grant.grantor),
            privilege=milvus_pb2.PrivilegeEntity(name=privilege),
        ),
    )


def _group_info(name: str, privileges: Sequence[str]) -> milvus_pb2.PrivilegeGroupInfo:
    return milvus_pb2.PrivilegeGroupInfo(
        group_name=name, privileges=[milvus_pb2.PrivilegeEntity(name=p) for p in privileges]
    )
