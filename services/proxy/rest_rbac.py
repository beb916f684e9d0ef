"""RESTful v2 ``/users``, ``/roles`` and ``/privilege_groups`` (Milvus's shapes, read from its
``handler_v2.go``): each route is one gRPC call of ``grpc_rbac.py``, so credentials and
privileges are checked as for pymilvus."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from pymilvus.grpc_gen import milvus_pb2

from vectide.services.proxy import rest_body as rb

if TYPE_CHECKING:
    from vectide.services.proxy.rest_call import Handler, RestCall, RestCaller


def _b64(password: str) -> str:
    """Passwords cross the gRPC API base64-encoded, as pymilvus sends them."""
    return base64.b64encode(password.encode()).decode()


def user_routes(api: RestCaller) -> dict[str, Handler]:
    def user(call: RestCall) -> str:
        return rb.get(call.body, "userName", str)

    def role_change(call: RestCall, kind: int) -> dict[str, Any]:
        request = milvus_pb2.OperateUserRoleRequest(
            username=user(call), role_name=rb.get(call.body, "roleName", str), type=kind
        )
        return api.empty("OperateUserRole", request, call)

    def describe(call: RestCall) -> list[str]:
        request = milvus_pb2.SelectUserRequest(
            user=milvus_pb2.UserEntity(name=user(call)), include_role_info=True
        )
        found = api.call("SelectUser", request, call.db_name).results
        return [r.name for r in found[0].roles] if found else []

    return {
        "create": lambda c: api.empty(
            "CreateCredential",
            milvus_pb2.CreateCredentialRequest(
                username=user(c), password=_b64(rb.get(c.body, "password", str))
            ),
            c,
        ),
        "list": lambda c: list(
            api.call("ListCredUsers", milvus_pb2.ListCredUsersRequest(), c.db_name).usernames
        ),
        "describe": describe,
        "drop": lambda c: api.empty(
            "DeleteCredential", milvus_pb2.DeleteCredentialRequest(username=user(c)), c
        ),
        "update_password": lambda c: api.empty(
            "UpdateCredential",
            milvus_pb2.UpdateCredentialRequest(
                username=user(c),
                oldPassword=_b64(rb.get(c.body, "password", str)),
                newPassword=_b64(rb.get(c.body, "newPassword", str)),
            ),
            c,
        ),
        "grant_role": lambda c: role_change(c, milvus_pb2.OperateUserRoleType.AddUserToRole),
        "revoke_role": lambda c: role_change(c, milvus_pb2.OperateUserRoleType.RemoveUserFromRole),
    }


def role_routes(api: RestCaller) -> dict[str, Handler]:
    def role(call: RestCall) -> str:
        return rb.get(call.body, "roleName", str)

    def privilege(call: RestCall, kind: int) -> dict[str, Any]:
        entity = milvus_pb2.GrantEntity(
            role=milvus_pb2.RoleEntity(name=role(call)),
            object=milvus_pb2.ObjectEntity(name=rb.get(call.body, "objectType", str)),
            object_name=rb.get(call.body, "objectName", str),
            db_name=rb.get(call.body, "dbName", str, "") or call.db_name,
            grantor=milvus_pb2.GrantorEntity(
                privilege=milvus_pb2.PrivilegeEntity(name=rb.get(call.body, "privilege", str))
            ),
        )
        request = milvus_pb2.OperatePrivilegeRequest(entity=entity, type=kind)
        return api.empty("OperatePrivilege", request, call)

    def privilege_v2(call: RestCall, kind: int) -> dict[str, Any]:
        request = milvus_pb2.OperatePrivilegeV2Request(
            role=milvus_pb2.RoleEntity(name=role(call)),
            grantor=milvus_pb2.GrantorEntity(
                privilege=milvus_pb2.PrivilegeEntity(name=rb.get(call.body, "privilege", str))
            ),
            type=kind,
            db_name=rb.get(call.body, "dbName", str, "") or call.db_name,
            collection_name=rb.get(call.body, "collectionName", str, ""),
        )
        return api.empty("OperatePrivilegeV2", request, call)

    def describe(call: RestCall) -> list[dict[str, str]]:
        request = milvus_pb2.SelectGrantRequest(
            entity=milvus_pb2.GrantEntity(role=milvus_pb2.RoleEntity(name=role(call)))
        )
        return [
            {
                "objectType": e.object.name,
                "objectName": e.object_name,
                "dbName": e.db_name,
                "privilege": e.grantor.privilege.name,
                "grantor": e.grantor.user.name,
            }
            for e in api.call("SelectGrant", request, call.db_name).entities
        ]

    grant, revoke = milvus_pb2.OperatePrivilegeType.Grant, milvus_pb2.OperatePrivilegeType.Revoke
    return {
        "create": lambda c: api.empty(
            "CreateRole",
            milvus_pb2.CreateRoleRequest(entity=milvus_pb2.RoleEntity(name=role(c))),
            c,
        ),
        "list": lambda c: [
            r.role.name
            for r in api.call("SelectRole", milvus_pb2.SelectRoleRequest(), c.db_name).results
        ],
        "describe": describe,
        "drop": lambda c: api.empty("DropRole", milvus_pb2.DropRoleRequest(role_name=role(c)), c),
        "grant_privilege": lambda c: privilege(c, grant),
        "revoke_privilege": lambda c: privilege(c, revoke),
        "grant_privilege_v2": lambda c: privilege_v2(c, grant),
        "revoke_privilege_v2": lambda c: privilege_v2(c, revoke),
    }


def privilege_group_routes(api: RestCaller) -> dict[str, Handler]:
    """``/privilege_groups``: a group is named by ``privilegeGroupName``; ``list`` gives each
    group's privileges joined by commas, as Milvus's REST server does."""

    def group(call: RestCall) -> str:
        return rb.get(call.body, "privilegeGroupName", str)

    def change(call: RestCall, kind: int) -> dict[str, Any]:
        names = rb.get(call.body, "privileges", list)
        request = milvus_pb2.OperatePrivilegeGroupRequest(
            group_name=group(call),
            privileges=[milvus_pb2.PrivilegeEntity(name=str(n)) for n in names],
            type=kind,
        )
        return api.empty("OperatePrivilegeGroup", request, call)

    def listed(call: RestCall) -> dict[str, Any]:
        found = api.call(
            "ListPrivilegeGroups", milvus_pb2.ListPrivilegeGroupsRequest(), call.db_name
        ).privilege_groups
        return {
            "privilegeGroups": [
                {
                    "privilegeGroupName": g.group_name,
                    "privileges": ",".join(p.name for p in g.privileges),
                }
                for g in found
            ]
        }

    kinds = milvus_pb2.OperatePrivilegeGroupType
    return {
        "create": lambda c: api.empty(
            "CreatePrivilegeGroup", milvus_pb2.CreatePrivilegeGroupRequest(group_name=group(c)), c
        ),
        "drop": lambda c: api.empty(
            "DropPrivilegeGroup", milvus_pb2.DropPrivilegeGroupRequest(group_name=group(c)), c
        ),
        "list": listed,
        "add_privileges_to_group": lambda c: change(c, kinds.AddPrivilegesToGroup),
        "remove_privileges_from_group": lambda c: change(c, kinds.RemovePrivilegesFromGroup),
    }
