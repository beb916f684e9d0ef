"""What a grant is, what a request needs, and whether one covers the other (Milvus's policy).

A grant gives a role a privilege on an object: ``(object_type, db_name, object_name)`` with
``*`` as a wildcard for the database and the name. A request needs one privilege on one or
more objects of one type. Privileges are kept under their metastore names
(``PrivilegeInsert``); clients name them without the prefix (``Insert``, ``*`` for all).

As in Milvus's casbin model, a grant covers a request when the object types match, the
database and name match (or are ``*``), and the privileges are equal; or when the granted
privilege is ``All`` or a privilege group that contains the requested one, in which case
only the database (and, for the collection-scoped groups, the collection) has to match.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from vectide.services.common import errors

PREFIX = "Privilege"
ANY = "*"
ALL = "PrivilegeAll"
GLOBAL, COLLECTION, USER = "Global", "Collection", "User"
OBJECT_TYPES = (GLOBAL, COLLECTION, USER)


def _names(*names: str) -> frozenset[str]:
    return frozenset(PREFIX + n for n in names)


_READ_ONLY = _names(
    "Query", "Search", "IndexDetail", "GetFlushState", "GetLoadState", "GetLoadingProgress",
    "HasPartition", "ShowPartitions", "ShowCollections", "ListAliases", "ListDatabases",
    "DescribeCollection", "DescribeDatabase", "DescribeAlias", "GetStatistics",
)  # fmt: skip
_READ_WRITE = _READ_ONLY | _names(
    "CreateIndex", "DropIndex", "CreateCollection", "DropCollection", "CreatePartition",
    "DropPartition", "Load", "Release", "Insert", "Delete", "Upsert", "Import", "Flush",
    "Compaction", "LoadBalance", "RenameCollection", "CreateAlias", "DropAlias",
)  # fmt: skip
_ADMIN = _READ_WRITE | _names(
    "CreateOwnership", "DropOwnership", "SelectOwnership", "ManageOwnership", "SelectUser",
    "UpdateUser", "BackupRBAC", "RestoreRBAC", "CreateResourceGroup", "UpdateResourceGroups",
    "DropResourceGroup", "DescribeResourceGroup", "ListResourceGroups", "TransferReplica",
    "TransferNode", "CreateDatabase", "DropDatabase", "AlterDatabase",
)  # fmt: skip
# Milvus 2.5's built-in groups by level (``pkg/util/constant.go``): collection, database,
# cluster. A level's groups cover nothing of another level (no cascade).
_COLL_RO = _names(
    "Query", "Search", "IndexDetail", "GetFlushState", "GetLoadState", "GetLoadingProgress",
    "HasPartition", "ShowPartitions", "DescribeCollection", "DescribeAlias", "GetStatistics",
    "ListAliases",
)  # fmt: skip
_COLL_RW = _COLL_RO | _names(
    "Load", "Release", "Insert", "Delete", "Upsert", "Import", "Flush", "Compaction",
    "LoadBalance", "CreateIndex", "DropIndex", "CreatePartition", "DropPartition",
)  # fmt: skip
_COLL_ADMIN = _COLL_RW | _names("CreateAlias", "DropAlias")
_DB_RO = _names("ShowCollections", "DescribeDatabase")
_DB_RW = _DB_RO | _names("AlterDatabase")
_DB_ADMIN = _DB_RW | _names("CreateCollection", "DropCollection")
_CLUSTER_RO = _names(
    "ListDatabases", "SelectOwnership", "SelectUser", "DescribeResourceGroup",
    "ListResourceGroups", "ListPrivilegeGroups",
)  # fmt: skip
_CLUSTER_RW = _CLUSTER_RO | _names(
    "FlushAll", "TransferNode", "TransferReplica", "UpdateResourceGroups"
)  # fmt: skip
_CLUSTER_ADMIN = _CLUSTER_RW | _names(
    "BackupRBAC", "RestoreRBAC", "CreateDatabase", "DropDatabase", "CreateOwnership",
    "DropOwnership", "ManageOwnership", "CreateResourceGroup", "DropResourceGroup",
    "UpdateUser", "RenameCollection", "CreatePrivilegeGroup", "DropPrivilegeGroup",
    "OperatePrivilegeGroup",
)  # fmt: skip
GROUP_PREFIX = "PrivilegeGroup"
#: Milvus 2.4's groups, granted before levels existed: never refused for their object
_V1_GROUPS = frozenset({"PrivilegeGroupReadOnly", "PrivilegeGroupReadWrite", "PrivilegeGroupAdmin"})
COLLECTION_LEVEL, DATABASE_LEVEL, CLUSTER_LEVEL = "collection", "database", "cluster"
#: Milvus's built-in groups (``common.security.*Privileges`` defaults) and the level a grant
#: of each applies at: a collection (or ``*``), a whole database, the whole cluster
GROUPS: dict[str, tuple[frozenset[str], str]] = {
    "PrivilegeGroupReadOnly": (_READ_ONLY, COLLECTION_LEVEL),
    "PrivilegeGroupReadWrite": (_READ_WRITE, COLLECTION_LEVEL),
    "PrivilegeGroupAdmin": (_ADMIN, DATABASE_LEVEL),
    "PrivilegeGroupCollectionReadOnly": (_COLL_RO, COLLECTION_LEVEL),
    "PrivilegeGroupCollectionReadWrite": (_COLL_RW, COLLECTION_LEVEL),
    "PrivilegeGroupCollectionAdmin": (_COLL_ADMIN, COLLECTION_LEVEL),
    "PrivilegeGroupDatabaseReadOnly": (_DB_RO, DATABASE_LEVEL),
    "PrivilegeGroupDatabaseReadWrite": (_DB_RW, DATABASE_LEVEL),
    "PrivilegeGroupDatabaseAdmin": (_DB_ADMIN, DATABASE_LEVEL),
    "PrivilegeGroupClusterReadOnly": (_CLUSTER_RO, CLUSTER_LEVEL),
    "PrivilegeGroupClusterReadWrite": (_CLUSTER_RW, CLUSTER_LEVEL),
    "PrivilegeGroupClusterAdmin": (_CLUSTER_ADMIN, CLUSTER_LEVEL),
}

#: what every user may do through the ``public`` role of a new cluster (Milvus's defaults):
#: describe and list collections, and read index details, in every database
PUBLIC_DEFAULTS = (
    (GLOBAL, "PrivilegeDescribeCollection"),
    (GLOBAL, "PrivilegeShowCollections"),
    (COLLECTION, "PrivilegeIndexDetail"),
)


@dataclass(frozen=True)
class Grant:
    role: str
    object_type: str
    object_name: str
    db_name: str
    privilege: str  # metastore name: PrivilegeInsert
    grantor: str = ""

    def key(self) -> tuple[str, str, str, str, str]:
        """Identity of the grant (who granted it is not part of it)."""
        return (self.role, self.object_type, self.object_name, self.db_name, self.privilege)


@dataclass(frozen=True)
class Requirement:
    """The privilege an RPC needs, on every one of ``object_names`` (``*``: no name)."""

    object_type: str
    privilege: str
    db_name: str
    object_names: tuple[str, ...] = (ANY,)

    def describe(self) -> str:
        return f"{api_name(self.privilege)} on {self.object_type} {', '.join(self.object_names)}"


def api_name(privilege: str) -> str:
    """``PrivilegeInsert`` -> ``Insert``, ``PrivilegeGroupClusterAdmin`` -> ``ClusterAdmin``
    (what clients send and read back, as Milvus's MetaStore2API)."""
    for prefix in (GROUP_PREFIX, PREFIX):
        if privilege.startswith(prefix):
            return privilege[len(prefix) :]
    return privilege


def store_name(privilege: str, known: frozenset[str], custom: Collection[str] = ()) -> str:
    """A client's privilege name (``Insert``, ``*``, a built-in group ``ClusterReadOnly``, a
    custom group's name) as stored, or a clear error."""
    if privilege == ANY:
        return ALL
    for name in (PREFIX + privilege, GROUP_PREFIX + privilege):
        if name in GROUPS or (name in known and not name.startswith(GROUP_PREFIX)):
            return name
    if privilege in custom:
        return GROUP_PREFIX + privilege
    raise errors.invalid(f"not found the privilege name[{privilege}]")


def group_members(
    privilege: str, custom: Mapping[str, frozenset[str]]
) -> tuple[frozenset[str], str] | None:
    """A stored group name's privileges and level (a custom group's is the grant's object,
    as a collection group's); None for a single privilege."""
    found = GROUPS.get(privilege)
    if found is not None:
        return found
    members = (
        custom.get(privilege[len(GROUP_PREFIX) :]) if privilege.startswith(GROUP_PREFIX) else None
    )
    return None if members is None else (members, COLLECTION_LEVEL)


def _matches(granted: str, wanted: str) -> bool:
    return granted in (ANY, wanted)


def covers(
    grant: Grant, need: Requirement, name: str, custom: Mapping[str, frozenset[str]] | None = None
) -> bool:
    """Whether ``grant`` allows ``need`` on the object ``name`` (``custom``: the custom
    privilege groups, by name)."""
    if not _matches(grant.db_name, need.db_name):
        return False
    if grant.privilege == ALL:
        return True
    group = group_members(grant.privilege, custom or {})
    if group is not None:
        members, level = group
        if level == COLLECTION_LEVEL and not (grant.object_name in (ANY, name) or name == ANY):
            return False
        return need.privilege in members
    return (
        grant.object_type == need.object_type
        and _matches(grant.object_name, name)
        and grant.privilege == need.privilege
    )


def permitted(
    grants: list[Grant], need: Requirement, custom: Mapping[str, frozenset[str]] | None = None
) -> bool:
    """Whether ``grants`` (of all the caller's roles) allow ``need`` on every object."""
    return all(any(covers(g, need, name, custom) for g in grants) for name in need.object_names)


def check_level(privilege: str, db_name: str, collection: str) -> None:
    """Milvus's rule for granting a built-in group of the database or cluster level: on
    every collection (``*``), and for the cluster level in every database (``*``) too."""
    group = GROUPS.get(privilege)
    if group is None or privilege in _V1_GROUPS:
        return
    level, shown = group[1], api_name(privilege)
    if level in (DATABASE_LEVEL, CLUSTER_LEVEL) and collection != ANY:
        raise errors.invalid(
            f"{shown} is a {level}-level privilege group: grant it on collection *"
        )
    if level == CLUSTER_LEVEL and db_name != ANY:
        raise errors.invalid(f"{shown} is a cluster-level privilege group: grant it on database *")
