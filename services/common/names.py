"""Database names, and the one string that names a collection (or an alias) in a database.

Milvus scopes collections by database; Vectide carries the database inside the name every
internal call already takes: ``qualified("d1", "docs") == "d1.docs"``, and a name in the
``default`` database stays bare (``"docs"``), so the catalog's keys, the proxy cache and the
internal RPCs written before databases existed keep working unchanged. The split is
unambiguous because Milvus names hold only letters, digits and underscores (a dot is
rejected when a database, collection or alias is created).
"""

from __future__ import annotations

from vectide.services.common.errors import Code, MilvusError

DEFAULT_DB = "default"
#: Milvus's default resource group: the query nodes no other group asked for
DEFAULT_RESOURCE_GROUP = "__default_resource_group"
#: its limits, and the capacity DescribeResourceGroup reports for it (others: their requests)
DEFAULT_RESOURCE_GROUP_CAPACITY = 1_000_000
MAX_NAME_LENGTH = 255
MAX_DB_NAME_LENGTH = 64


def qualified(db_name: str, name: str) -> str:
    """The reference to ``name`` in ``db_name`` (bare in the default database)."""
    if not db_name or db_name == DEFAULT_DB:
        return name
    return f"{db_name}.{name}"


def split(ref: str) -> tuple[str, str]:
    """(database, name) of a reference made by :func:`qualified`."""
    db_name, dot, name = ref.partition(".")
    return (db_name, name) if dot else (DEFAULT_DB, ref)


def describe(ref: str) -> str:
    """How Milvus's errors name a collection: ``[database=d1][collection=docs]``."""
    db_name, name = split(ref)
    if db_name == DEFAULT_DB:
        return f"[collection={name}]"
    return f"[database={db_name}][collection={name}]"


def validate_db_name(name: str) -> None:
    """Milvus's rules (proxy ``validateDatabaseName``), with its code 802."""
    problem = _problem(name, "database", MAX_DB_NAME_LENGTH)
    if problem:
        raise MilvusError(
            Code.DATABASE_INVALID_NAME, f"invalid database name[database={name}]: {problem}"
        )


def validate_name(name: str, kind: str = "collection") -> None:
    """Milvus's rules for collection and alias names (``validateCollectionNameOrAlias``)."""
    problem = _problem(name, kind, MAX_NAME_LENGTH)
    if problem:
        raise MilvusError(Code.PARAMETER_INVALID, f"Invalid {kind} name: {name}. {problem}")


def _problem(name: str, kind: str, max_length: int) -> str:
    if not name:
        return f"{kind} name should not be empty"
    if len(name) > max_length:
        return f"the length of a {kind} name must be less than {max_length} characters"
    if not (name[0] == "_" or (name[0].isascii() and name[0].isalpha())):
        return f"the first character of a {kind} name must be an underscore or letter"
    if not all(c == "_" or (c.isascii() and c.isalnum()) for c in name):
        return f"{kind} name can only contain numbers, letters and underscores"
    return ""
