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
#: Milvus's built-in groups (``common.security.*Privileges`` defaults), and whether a grant of
#: the group is bound to its collection (read-only and read-write) or to the whole database
GROUPS: dict[str, tuple[frozenset[str], bool]] = {
    "PrivilegeGroupReadOnly": (_READ_ONLY, True),
    "PrivilegeGroupReadWrite": (_READ_WRITE, True),
    "PrivilegeGroupAdmin": (_ADMIN, False),
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
    """``PrivilegeInsert`` -> ``Insert`` (what clients send and read back)."""
    return privilege[len(PREFIX) :] if privilege.startswith(PREFIX) else privilege


def store_name(privilege: str, known: frozenset[str]) -> str:
    """A client's privilege name (``Insert``, ``*``) as stored, or a clear error."""
    name = ALL if privilege == ANY else PREFIX + privilege
    if name not in known:
        raise errors.invalid(f"not found the privilege name[{privilege}]")
    if name.startswith(PREFIX + "Group") and name not in GROUPS:
        raise errors.invalid(
            f"privilege group {privilege} is not supported yet; grant its privileges one by one"
        )
    return name


def _matches(granted: str, wanted: str) -> bool:
    return granted in (ANY, wanted)


def covers(grant: Grant, need: Requirement, name: str) -> bool:
    """Whether ``grant`` allows ``need`` on the object ``name``."""
    if not _matches(grant.db_name, need.db_name):
        return False
    if grant.privilege == ALL:
        return True
    group = GROUPS.get(grant.privilege)
    if group is not None:
        members, per_collection = group
        if per_collection and not (grant.object_name in (ANY, name) or name == ANY):
            return False
        return need.privilege in members
    return (
        grant.object_type == need.object_type
        and _matches(grant.object_name, name)
        and grant.privilege == need.privilege
    )


def permitted(grants: list[Grant], need: Requirement) -> bool:
    """Whether ``grants`` (of all the caller's roles) allow ``need`` on every object."""
    return all(any(covers(g, need, name) for g in grants) for name in need.object_names)
