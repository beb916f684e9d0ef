"""Collection and field properties: what AlterCollection and AlterCollectionField change.

Milvus keeps a collection's properties as free key/value pairs (CreateCollection's
``properties``, AlterCollection) and acts on a few of them; Vectide stores every pair the same
way and acts on ``collection.ttl.seconds``: rows older than that many seconds are no longer
read, and garbage collection and compaction remove them later (docs/compatibility.md,
"Collection properties"). The others it keeps and describes. A
field's alterable params are Milvus's: ``max_length``, ``max_capacity`` and ``mmap.enabled``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from vectide.services.common import errors, timestamp, timestamptz
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionInfo, FieldSchema, IndexInfo

#: Milvus's key (``common.CollectionTTLConfigKey``): seconds a row stays readable after it was
#: inserted (upserted rows start again); 0 or negative: forever
TTL_KEY = "collection.ttl.seconds"


def check(properties: Mapping[str, str]) -> None:
    """Refuse values Vectide would act on wrongly (as Milvus's proxy does at create and alter):
    a TTL that is no integer, a time zone that is no IANA name."""
    zone = properties.get(timestamptz.TIMEZONE_KEY)
    if zone is not None:
        checked_zone(zone)
    value = properties.get(TTL_KEY)
    if value is not None:
        try:
            int(value)
        except ValueError:
            raise errors.invalid(
                f"collection TTL is not a valid positive integer: {TTL_KEY}={value!r}"
            ) from None


def checked_zone(name: str) -> str:
    """An IANA time zone a client named (a property, a read's ``timezone``), or
    INVALID_PARAMETER naming it."""
    try:
        return timestamptz.check_zone(name)
    except timestamptz.TimestamptzError as exc:
        raise errors.invalid(str(exc)) from None


def inherited(database: Mapping[str, str], collection: Mapping[str, str]) -> dict[str, str]:
    """A new collection's properties: its own, and its database's ``timezone`` when it names
    none (Milvus's database-level default zone)."""
    zone = database.get(timestamptz.TIMEZONE_KEY)
    if zone and timestamptz.TIMEZONE_KEY not in collection:
        return {**collection, timestamptz.TIMEZONE_KEY: zone}
    return dict(collection)


def one_change(what: str, properties: Mapping[str, str], delete_keys: Sequence[str]) -> None:
    """Milvus's rule for its Alter* calls: set properties or delete keys, one per call."""
    if properties and delete_keys:
        raise errors.invalid(f"{what} cannot modify properties and delete keys at the same time")
    if not properties and not delete_keys:
        raise errors.invalid(f"{what} with empty properties and delete keys")


def merged(
    what: str, current: Mapping[str, str], properties: Mapping[str, str], delete_keys: Sequence[str]
) -> dict[str, str]:
    """``current`` with ``properties`` set or ``delete_keys`` deleted (``one_change``)."""
    one_change(what, properties, delete_keys)
    gone = set(delete_keys)
    return {k: v for k, v in current.items() if k not in gone} | dict(properties)


def ttl_seconds(properties: Mapping[str, str]) -> int:
    """The collection's TTL in seconds, 0 for none (values are checked when set)."""
    try:
        return max(int(properties.get(TTL_KEY, 0)), 0)
    except ValueError:  # stored before values were checked
        return 0


def expire_ts(properties: Mapping[str, str], read_ms: int) -> int:
    """The oldest insert stamp a read at wall-clock ``read_ms`` returns (0: no bound)."""
    ttl = ttl_seconds(properties)
    if not ttl:
        return 0
    return timestamp.compose(max(read_ms - ttl * 1000, 0))


def oldest_visible(info: CollectionInfo, read_ms: int, snapshot: int = 0) -> int:
    """The oldest insert stamp a read returns (0: no bound): the TTL's bound counted back
    from ``read_ms``, and for a read at or after the collection's last truncation (a
    ``snapshot`` stamp, 0: now) the truncation's stamp."""
    bound = expire_ts(info.properties, read_ms)
    if info.truncated_ts and (not snapshot or snapshot >= info.truncated_ts):
        bound = max(bound, info.truncated_ts)
    return bound


def expiries(collections: Iterable[CollectionInfo], read_ms: int) -> dict[int, int]:
    """Per collection with a TTL or a truncation older than ``read_ms``, the oldest insert
    stamp a read at ``read_ms`` or later returns: compaction drops older rows, garbage
    collection segments whose rows are all older."""
    latest = timestamp.compose(read_ms, timestamp.MAX_LOGICAL)  # every stamp of read_ms
    bounds = {c.collection_id: oldest_visible(c, read_ms, latest) for c in collections}
    return {collection_id: ts for collection_id, ts in bounds.items() if ts}


#: a field param kept and described without effect (Vectide holds columns in memory)
MMAP_KEY = "mmap.enabled"
#: the bounds Milvus gives the alterable numeric params
_BOUNDS = {"max_length": (1, 65535), "max_capacity": (1, 4096)}


def altered_field(
    field: FieldSchema, properties: Mapping[str, str], delete_keys: Sequence[str] = ()
) -> FieldSchema:
    """``field`` with ``properties`` set (``max_length`` of a VarChar field or an Array of
    VarChar, ``max_capacity`` of an Array, ``mmap.enabled``) and ``mmap.enabled`` deleted
    if asked; anything else is refused, naming the field. Rows already stored keep their
    values: a lower ``max_length`` bounds new rows only."""
    one_change("alter collection field", properties, delete_keys)
    if field.is_primary:
        raise errors.invalid(f"the primary key field {field.name} cannot be altered")
    changes: dict[str, object] = {}
    extra = dict(field.properties)
    for key, value in properties.items():
        if key == MMAP_KEY:
            extra[key] = _flag(key, value)
        elif key in _BOUNDS:
            _check_applies(field, key)
            changes[key] = _bounded(field, key, value)
        else:
            raise errors.invalid(
                f"{_refused(key, field)}: only max_length, max_capacity and {MMAP_KEY} can be"
            )
    for key in delete_keys:
        if key != MMAP_KEY:
            raise errors.invalid(f"{_refused(key, field)}: only {MMAP_KEY} can be deleted")
        extra.pop(key, None)
    return replace(field, properties=extra, **changes)


def altered_index(
    index: IndexInfo, properties: Mapping[str, str], delete_keys: Sequence[str] = ()
) -> IndexInfo:
    """``index`` with ``mmap.enabled`` set or deleted (AlterIndex); Milvus alters nothing
    else of a built index."""
    one_change("alter index", properties, delete_keys)
    extra = dict(index.properties)
    for key, value in properties.items():
        if key != MMAP_KEY:
            raise errors.invalid(
                f"{key} of index {index.index_name} cannot be altered: only {MMAP_KEY} can"
            )
        extra[key] = _flag(key, value)
    for key in delete_keys:
        if key != MMAP_KEY:
            raise errors.invalid(
                f"{key} of index {index.index_name} cannot be deleted: only {MMAP_KEY} can"
            )
        extra.pop(key, None)
    return replace(index, properties=extra)


def _refused(key: str, field: FieldSchema) -> str:
    return f"{key} of field {field.name} cannot be altered"


def _check_applies(field: FieldSchema, key: str) -> None:
    is_array = field.data_type == DataType.ARRAY
    holds_text = field.data_type == DataType.VARCHAR or (
        is_array and field.element_type == DataType.VARCHAR
    )
    if (key == "max_length" and not holds_text) or (key == "max_capacity" and not is_array):
        kind = "VarChar fields and Arrays of VarChar" if key == "max_length" else "Array fields"
        raise errors.invalid(f"{_refused(key, field)}: {key} applies to {kind} only")


def _bounded(field: FieldSchema, key: str, value: str) -> int:
    low, high = _BOUNDS[key]
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise errors.invalid(
            f"{key} of field {field.name} must be an integer in [{low}, {high}], got {value!r}"
        )
    return number


def _flag(key: str, value: str) -> str:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise errors.invalid(f"{key} must be true or false, got {value!r}")
    return text
