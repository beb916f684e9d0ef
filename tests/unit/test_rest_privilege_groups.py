"""RESTful v2 ``/privilege_groups`` (Milvus's routes and shapes) on the fault harness: each
route is one gRPC call of the RBAC mixin."""

from __future__ import annotations

import json

from vectide.services.common.kv import MemoryKV
from vectide.services.common.security.rbac import Rbac
from vectide.services.common.security.store import RbacStore
from vectide.services.proxy.grpc_auth import PRIVILEGE_NAMES
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.proxy.rest_api import RestApi
from vectide.services.testing import Harness


def test_privilege_groups_are_created_changed_listed_and_dropped():
    rbac = Rbac(RbacStore(MemoryKV()), PRIVILEGE_NAMES, rounds=4)  # bcrypt's cheapest cost
    api = RestApi(MilvusService(Harness().proxy, rbac=rbac))

    def post(action: str, body: dict) -> dict:
        raw = json.dumps(body).encode()
        return api.handle(f"/v2/vectordb/privilege_groups/{action}", raw, {})

    def listed() -> dict[str, str]:
        reply = post("list", {})
        assert reply["code"] == 0, reply
        return {g["privilegeGroupName"]: g["privileges"] for g in reply["data"]["privilegeGroups"]}

    assert post("create", {"privilegeGroupName": "readers"}) == {"code": 0, "data": {}}
    change = {"privilegeGroupName": "readers", "privileges": ["Search", "Query"]}
    assert post("add_privileges_to_group", change)["code"] == 0
    groups = listed()
    assert set(groups["readers"].split(",")) == {"Search", "Query"}
    less = {"privilegeGroupName": "readers", "privileges": ["Query"]}
    assert post("remove_privileges_from_group", less)["code"] == 0
    assert listed()["readers"] == "Search"
    assert post("add_privileges_to_group", {"privilegeGroupName": "readers"})["code"] == 1802
    assert post("drop", {"privilegeGroupName": "readers"})["code"] == 0
    assert "readers" not in listed()
